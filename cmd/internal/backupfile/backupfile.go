// Package backupfile is the file format of ctxgraph backups: a header
// line, a JSON manifest, the store's snapshot in length-prefixed frames,
// and a trailer with the SHA-256 of everything before it.
//
//	"ctxgraph-backup 1\n"
//	manifest JSON "\n"
//	frames: length u32 BE (1..MaxFrame) | bytes
//	u32 0                                   (end of frames)
//	trailer JSON "\n"                       ({"bytes": N, "sha256": hex})
//
// The framing lets a backup be streamed (over HTTP) without knowing its
// size; the trailer lets a reader refuse a truncated or damaged file
// before anything is restored from it. The package knows nothing of
// what the manifest and the snapshot hold.
package backupfile

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
)

// Magic is the first line of every backup file.
const Magic = "ctxgraph-backup 1\n"

// MaxFrame bounds one frame; MaxManifest the manifest line.
const (
	MaxFrame    = 4 << 20
	MaxManifest = 1 << 20
)

// ErrBad marks input that is not a whole, intact backup file.
var ErrBad = errors.New("not a valid ctxgraph backup")

type trailer struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Writer writes a backup: NewWriter writes the header and manifest,
// Write the snapshot, Close the end marker and trailer.
type Writer struct {
	w   *bufio.Writer
	h   hash.Hash
	n   int64
	buf []byte
}

// NewWriter starts a backup on w with manifest (marshalled as JSON).
func NewWriter(w io.Writer, manifest any) (*Writer, error) {
	bw := &Writer{w: bufio.NewWriterSize(w, 256<<10), h: sha256.New(), buf: make([]byte, 0, 256<<10)}
	js, err := json.Marshal(manifest)
	if err != nil {
		return nil, fmt.Errorf("backup manifest: %w", err)
	}
	if len(js) > MaxManifest {
		return nil, fmt.Errorf("backup manifest of %d bytes is over %d", len(js), MaxManifest)
	}
	if err := bw.raw(append(append([]byte(Magic), js...), '\n')); err != nil {
		return nil, err
	}
	return bw, nil
}

// Bytes is how many bytes were written so far.
func (bw *Writer) Bytes() int64 { return bw.n }

func (bw *Writer) raw(b []byte) error {
	bw.h.Write(b)
	bw.n += int64(len(b))
	_, err := bw.w.Write(b)
	return err
}

// Write adds snapshot bytes.
func (bw *Writer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), cap(bw.buf)-len(bw.buf))
		bw.buf = append(bw.buf, p[:k]...)
		p = p[k:]
		if len(bw.buf) == cap(bw.buf) {
			if err := bw.frame(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (bw *Writer) frame() error {
	if len(bw.buf) == 0 {
		return nil
	}
	if err := bw.raw(binary.BigEndian.AppendUint32(nil, uint32(len(bw.buf)))); err != nil {
		return err
	}
	err := bw.raw(bw.buf)
	bw.buf = bw.buf[:0]
	return err
}

// Close writes the last frame, the end marker and the trailer, and
// flushes. It does not close the underlying writer.
func (bw *Writer) Close() error {
	if err := bw.frame(); err != nil {
		return err
	}
	if err := bw.raw([]byte{0, 0, 0, 0}); err != nil {
		return err
	}
	tr, _ := json.Marshal(trailer{Bytes: bw.n, SHA256: hex.EncodeToString(bw.h.Sum(nil))})
	if _, err := bw.w.Write(append(tr, '\n')); err != nil {
		return err
	}
	return bw.w.Flush()
}

// Reader reads a backup: NewReader reads the header and manifest, Read
// the snapshot bytes; at their end Read checks the trailer and returns
// io.EOF only if the whole file is intact (else an error wrapping
// ErrBad). A caller that needs the file whole before acting on it reads
// it through once first.
type Reader struct {
	r        *bufio.Reader
	h        hash.Hash
	n        int64
	left     int // bytes left in the current frame
	done     error
	manifest []byte
}

// NewReader reads the header and manifest of the backup on r.
func NewReader(r io.Reader) (*Reader, error) {
	br := &Reader{r: bufio.NewReaderSize(r, 256<<10), h: sha256.New()}
	magic := make([]byte, len(Magic))
	if _, err := io.ReadFull(br.r, magic); err != nil || string(magic) != Magic {
		return nil, fmt.Errorf("%w: no backup header", ErrBad)
	}
	br.sum(magic)
	line, err := readLine(br.r, MaxManifest+1)
	if err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrBad, err)
	}
	br.sum(line)
	br.manifest = bytes.TrimSuffix(line, []byte("\n"))
	if !json.Valid(br.manifest) {
		return nil, fmt.Errorf("%w: manifest is not JSON", ErrBad)
	}
	return br, nil
}

// Manifest decodes the manifest into v.
func (br *Reader) Manifest(v any) error {
	if err := json.Unmarshal(br.manifest, v); err != nil {
		return fmt.Errorf("%w: manifest: %v", ErrBad, err)
	}
	return nil
}

func (br *Reader) sum(b []byte) {
	br.h.Write(b)
	br.n += int64(len(b))
}

func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > limit {
			return nil, errors.New("line too long")
		}
		if err == nil {
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// Read returns snapshot bytes.
func (br *Reader) Read(p []byte) (int, error) {
	if br.done != nil {
		return 0, br.done
	}
	if len(p) == 0 {
		return 0, nil
	}
	if br.left == 0 {
		var hdr [4]byte
		if _, err := io.ReadFull(br.r, hdr[:]); err != nil {
			br.done = fmt.Errorf("%w: truncated (frame header): %v", ErrBad, err)
			return 0, br.done
		}
		br.sum(hdr[:])
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 {
			br.done = br.checkTrailer()
			return 0, br.done
		}
		if n > MaxFrame {
			br.done = fmt.Errorf("%w: frame of %d bytes", ErrBad, n)
			return 0, br.done
		}
		br.left = int(n)
	}
	n, err := br.r.Read(p[:min(len(p), br.left)])
	br.sum(p[:n])
	br.left -= n
	if n == 0 && err != nil {
		br.done = fmt.Errorf("%w: truncated: %v", ErrBad, err)
		return 0, br.done
	}
	return n, nil
}

func (br *Reader) checkTrailer() error {
	line, err := readLine(br.r, 1024)
	if err != nil {
		return fmt.Errorf("%w: no trailer: %v", ErrBad, err)
	}
	var tr trailer
	if err := json.Unmarshal(bytes.TrimSuffix(line, []byte("\n")), &tr); err != nil {
		return fmt.Errorf("%w: trailer: %v", ErrBad, err)
	}
	if got := hex.EncodeToString(br.h.Sum(nil)); tr.Bytes != br.n || tr.SHA256 != got {
		return fmt.Errorf("%w: checksum mismatch (%d bytes, sha256 %s; trailer says %d, %s)", ErrBad, br.n, got, tr.Bytes, tr.SHA256)
	}
	if _, err := br.r.ReadByte(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: data after the trailer", ErrBad)
	}
	return io.EOF
}
