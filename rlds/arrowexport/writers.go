package arrowexport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
)

// FileWriter is a RecordWriter that ends a file: Close writes what
// follows the last batch (the IPC footer or end-of-stream marker, the
// Parquet footer). Close does not close the underlying io.Writer.
type FileWriter interface {
	RecordWriter
	Close() error
}

// NewWriter returns a writer of one file in format f (arrow,
// arrow-stream or parquet) to w. The Arrow IPC file format needs no
// seeking: w may be a network stream.
func NewWriter(f Format, w io.Writer) (FileWriter, error) {
	switch f {
	case FormatArrow:
		return &ipcFileWriter{w: &posWriter{w: w}}, nil
	case FormatArrowStream:
		return &ipcStreamWriter{w: w}, nil
	case FormatParquet:
		return &parquetWriter{w: w}, nil
	case FormatLeRobot:
		return nil, fmt.Errorf("%w: lerobot is a directory, not a stream: use NewLeRobotWriter", ErrInvalid)
	}
	return nil, fmt.Errorf("%w: unknown format %q (want arrow, arrow-stream, parquet or lerobot)", ErrInvalid, f)
}

// posWriter gives the Arrow IPC file writer the one kind of seek it
// does: asking for the current position.
type posWriter struct {
	w   io.Writer
	pos int64
}

func (p *posWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.pos += int64(n)
	return n, err
}

func (p *posWriter) Seek(off int64, whence int) (int64, error) {
	if off == 0 && whence == io.SeekCurrent {
		return p.pos, nil
	}
	return p.pos, errors.New("arrowexport: seek on a stream")
}

type ipcFileWriter struct {
	w  *posWriter
	fw *ipc.FileWriter
}

func (x *ipcFileWriter) Begin(s *arrow.Schema) (err error) {
	x.fw, err = ipc.NewFileWriter(x.w, ipc.WithSchema(s), ipc.WithAllocator(memory.DefaultAllocator))
	return err
}

func (x *ipcFileWriter) Write(rec arrow.Record) error { return x.fw.Write(rec) }

func (x *ipcFileWriter) Close() error {
	if x.fw == nil {
		return nil
	}
	return x.fw.Close()
}

type ipcStreamWriter struct {
	w  io.Writer
	sw *ipc.Writer
}

func (x *ipcStreamWriter) Begin(s *arrow.Schema) error {
	x.sw = ipc.NewWriter(x.w, ipc.WithSchema(s), ipc.WithAllocator(memory.DefaultAllocator))
	return nil
}

func (x *ipcStreamWriter) Write(rec arrow.Record) error { return x.sw.Write(rec) }

func (x *ipcStreamWriter) Close() error {
	if x.sw == nil {
		return nil
	}
	return x.sw.Close()
}

// ParquetProperties are the Parquet writer properties of every export:
// zstd, dictionary encoding, row groups of at most 64 Ki rows, format
// 2.6 (nanosecond timestamps), and a required root (arrow/go's default,
// a repeated root, makes other readers see every column as repeated).
func ParquetProperties() *parquet.WriterProperties {
	return parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithDictionaryDefault(true),
		parquet.WithMaxRowGroupLength(64<<10),
		parquet.WithVersion(parquet.V2_6),
		parquet.WithRootRepetition(parquet.Repetitions.Required),
		parquet.WithCreatedBy("ctxgraph"),
	)
}

// parquetWriter writes Parquet. Parquet has no fixed-size list, and
// arrow/go's reader refuses a fixed-size list column holding nulls, so
// fixed_size_list columns are written as lists; their field metadata
// (ctxgraph.shape, and ctxgraph.fixed_size for embeddings) keeps the
// size.
type parquetWriter struct {
	w      io.Writer
	pw     *pqarrow.FileWriter
	schema *arrow.Schema
}

func (x *parquetWriter) Begin(s *arrow.Schema) (err error) {
	x.schema = parquetSchema(s)
	x.pw, err = pqarrow.NewFileWriter(x.schema, nopCloser{x.w}, ParquetProperties(),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	return err
}

func (x *parquetWriter) Write(rec arrow.Record) error {
	cols := make([]arrow.Array, rec.NumCols())
	for i, c := range rec.Columns() {
		if fl, ok := c.(*array.FixedSizeList); ok {
			cols[i] = fixedToList(fl)
			defer cols[i].Release()
			continue
		}
		cols[i] = c
	}
	out := array.NewRecord(x.schema, cols, rec.NumRows())
	defer out.Release()
	return x.pw.WriteBuffered(out)
}

// parquetSchema is s with every fixed-size list a list.
func parquetSchema(s *arrow.Schema) *arrow.Schema {
	fields := slices.Clone(s.Fields())
	for i, f := range fields {
		if fl, ok := f.Type.(*arrow.FixedSizeListType); ok {
			keys, vals := slices.Clone(f.Metadata.Keys()), slices.Clone(f.Metadata.Values())
			keys, vals = append(keys, MetaFixedSize), append(vals, strconv.Itoa(int(fl.Len())))
			fields[i].Type = arrow.ListOfField(fl.ElemField())
			fields[i].Metadata = arrow.NewMetadata(keys, vals)
		}
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md)
}

// MetaFixedSize is the field metadata that keeps the size of a
// fixed-size list stored as a list (in Parquet).
const MetaFixedSize = "ctxgraph.fixed_size"

// fixedToList views a fixed-size list array as a list array over the
// same values and validity: offsets are multiples of the size.
func fixedToList(fl *array.FixedSizeList) arrow.Array {
	t := fl.DataType().(*arrow.FixedSizeListType)
	n := int32(t.Len())
	d := fl.Data()
	offs := make([]int32, d.Offset()+d.Len()+1)
	for i := range offs {
		offs[i] = int32(i) * n
	}
	buf := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs))
	ld := array.NewData(arrow.ListOfField(t.ElemField()), d.Len(), []*memory.Buffer{d.Buffers()[0], buf},
		[]arrow.ArrayData{d.Children()[0]}, d.NullN(), d.Offset())
	defer ld.Release()
	return array.MakeFromData(ld)
}

func (x *parquetWriter) Close() error {
	if x.pw == nil {
		return nil
	}
	return x.pw.Close()
}

// nopCloser keeps the Parquet writer from closing the caller's writer.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// SplitWriter writes an export to files of at most RowsPerFile rows
// each (all of them when 0): path itself when one file is enough, else
// path with -00000, -00001, ... before its extension. Every file is a
// complete file of the format with the export's schema.
type SplitWriter struct {
	Format      Format
	Path        string
	RowsPerFile int64
	// Files lists the files written, in order.
	Files []string

	schema *arrow.Schema
	f      *os.File
	fw     FileWriter
	rows   int64 // in the current file
}

// Begin remembers the schema; files open as rows arrive (an empty export
// still writes one file).
func (s *SplitWriter) Begin(schema *arrow.Schema) error {
	s.schema = schema
	return nil
}

func (s *SplitWriter) name(i int) string {
	if s.RowsPerFile <= 0 {
		return s.Path
	}
	ext := filepath.Ext(s.Path)
	return fmt.Sprintf("%s-%05d%s", strings.TrimSuffix(s.Path, ext), i, ext)
}

func (s *SplitWriter) open() error {
	name := s.name(len(s.Files))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	fw, err := NewWriter(s.Format, f)
	if err == nil {
		err = fw.Begin(s.schema)
	}
	if err != nil {
		f.Close()
		return err
	}
	s.f, s.fw, s.rows = f, fw, 0
	s.Files = append(s.Files, name)
	return nil
}

func (s *SplitWriter) closeFile() error {
	if s.fw == nil {
		return nil
	}
	err := errors.Join(s.fw.Close(), s.f.Close())
	s.f, s.fw = nil, nil
	return err
}

// Write writes rec, slicing it where a file fills up.
func (s *SplitWriter) Write(rec arrow.Record) error {
	for off := int64(0); off < rec.NumRows(); {
		if s.fw != nil && s.RowsPerFile > 0 && s.rows >= s.RowsPerFile {
			if err := s.closeFile(); err != nil {
				return err
			}
		}
		if s.fw == nil {
			if err := s.open(); err != nil {
				return err
			}
		}
		n := rec.NumRows() - off
		if s.RowsPerFile > 0 {
			n = min(n, s.RowsPerFile-s.rows)
		}
		part := rec
		if off != 0 || n != rec.NumRows() {
			part = rec.NewSlice(off, off+n)
		}
		err := s.fw.Write(part)
		if part != rec {
			part.Release()
		}
		if err != nil {
			return err
		}
		s.rows += n
		off += n
	}
	return nil
}

// Close ends the last file (writing one empty file if no row came).
func (s *SplitWriter) Close() error {
	if len(s.Files) == 0 && s.schema != nil {
		if err := s.open(); err != nil {
			return err
		}
	}
	return s.closeFile()
}

// Copy writes every batch of an Arrow IPC stream to w, calling progress
// with the rows so far after each batch. It is how a client turns the
// daemon's stream into files.
func Copy(ctx context.Context, r io.Reader, w RecordWriter, progress func(rows int64)) (Stats, error) {
	rd, err := ipc.NewReader(r, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return Stats{}, fmt.Errorf("arrowexport: read stream: %w", err)
	}
	defer rd.Release()
	if err := w.Begin(rd.Schema()); err != nil {
		return Stats{}, err
	}
	var st Stats
	for rd.Next() {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		rec := rd.Record()
		if err := w.Write(rec); err != nil {
			return st, err
		}
		st.Rows += rec.NumRows()
		st.Batches++
		if progress != nil {
			progress(st.Rows)
		}
	}
	if err := rd.Err(); err != nil {
		return st, fmt.Errorf("arrowexport: read stream: %w", err)
	}
	return st, nil
}
