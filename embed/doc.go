// Package embed turns text and numeric observations into the dense,
// L2-normalised float32 vectors that the wave layer indexes.
//
// Every provider implements [Embedder]. Vectors are unit length, so a
// dot product is a cosine similarity, and every vector a provider
// returns has exactly [Embedder.Dimensions] components.
//
// # Providers
//
//   - [Hashing] is the offline default. It needs no model download and
//     no network: it hashes lowercase word unigrams, word bigrams and
//     character 3-grams into a fixed number of signed buckets with
//     FNV-1a. The same text gives the same vector in every process on
//     every machine, so vectors may be persisted and compared later.
//   - [OpenAI] calls any OpenAI-compatible embeddings endpoint
//     (POST {BaseURL}/v1/embeddings), in batches, with bounded retries
//     on 429 and 5xx responses.
//   - [Projection] is not an Embedder: it maps numeric vectors of one
//     fixed length (robot observations and actions) to a lower
//     dimension with a seeded Gaussian random projection
//     (Johnson–Lindenstrauss), so that nearby states stay nearby.
//
// [New] builds an Embedder from [Options]; [DefaultOptions] selects the
// hashing provider with 384 dimensions.
//
// # Errors
//
// Errors wrap the sentinels [ErrEmptyText], [ErrDimension], [ErrInvalid]
// and [ErrProvider]; check them with [errors.Is]. Batch calls name the
// index of the offending text.
//
// Note that this package shares its name with the standard library's
// embed package; a file that needs both must alias one of them.
package embed
