package particle

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"sync"
)

// readTableTails reads the index of each of Badger's table files in dir
// into the page cache, and nothing more, before Badger opens them.
// Badger reads a table's index through a memory mapping as it opens it,
// and a mapping's page fault reads ahead around it by the device's
// setting: with 8 MB on this VM's disk a 1M-edge store's open read 118 MB
// of its 145 MB of tables for some 20 MB of indexes, when the files were
// out of the page cache (BENCHMARKS.md, forty-third round). Found in the
// page cache, Badger's faults read nothing.
func readTableTails(dir string) {
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		return
	}
	next := make(chan string)
	var wg sync.WaitGroup
	for range min(4, len(tables)) {
		wg.Go(func() {
			for path := range next {
				readTableTail(path)
			}
		})
	}
	for _, p := range tables {
		next <- p
	}
	close(next)
	wg.Wait()
}

// tableTailSlack is what readTableTail reads before a table's index: its
// last block, which Badger's open reads for the table's biggest key
// (blocks are 4 KB by default).
const tableTailSlack = 64 << 10

// readTableTail reads the end of Badger's table file at path
// (tableTail), asking the kernel to read no more than that
// (fileRandom); errors are ignored (Badger's open reports a table it
// cannot read).
func readTableTail(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	fileRandom(f)
	if start, size, ok := tableTail(f); ok {
		_, _ = f.ReadAt(make([]byte, size-start), start)
	}
}

// tableTail returns where the end of Badger's table file f starts that
// its open reads: its last block, its index and what follows it, as
// Badger's table format lays them out (... blocks | index | index
// length (4 bytes) | checksum | checksum length (4 bytes), the lengths
// big-endian); and the file's size. ok is false where the lengths do
// not fit the file.
func tableTail(f *os.File) (start, size int64, ok bool) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, false
	}
	size = st.Size()
	var n [4]byte
	if _, err := f.ReadAt(n[:], size-4); err != nil {
		return 0, 0, false
	}
	at := size - 4 - int64(binary.BigEndian.Uint32(n[:])) - 4 // the index's length
	if at < 0 {
		return 0, 0, false
	}
	if _, err := f.ReadAt(n[:], at); err != nil {
		return 0, 0, false
	}
	index := at - int64(binary.BigEndian.Uint32(n[:]))
	if index < 0 {
		return 0, 0, false
	}
	return max(0, index-tableTailSlack), size, true
}
