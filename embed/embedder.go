package embed

import "context"

// Embedder turns text into dense vectors of a fixed dimension.
// Implementations are safe for concurrent use. Vectors are L2-normalised
// so that a dot product is a cosine similarity.
type Embedder interface {
	// Embed returns the vector of one text.
	Embed(ctx context.Context, text string) ([]float32, error)
	// EmbedBatch returns one vector per text, in order.
	EmbedBatch(ctx context.Context, texts []string) ([][]float32, error)
	// Dimensions is the length of every vector this embedder returns.
	Dimensions() int
}
