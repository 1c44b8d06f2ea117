package imagestore

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/gzip"
)

// benchLayer is a gzip (fastest level) layer of files*fileSize bytes of random text-like data. It
// barely compresses, so download and unpack volumes are nearly equal: the worst case for the wire.
func benchLayer(b *testing.B, seed uint64, files, fileSize int) (v1.Layer, int) {
	rng := rand.New(rand.NewPCG(seed, seed))
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 \n{}[]()=;:,."
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	buf := make([]byte, fileSize)
	for i := range files {
		for j := range buf {
			buf[j] = alphabet[rng.IntN(len(alphabet))]
		}
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("data/l%d/f%03d", seed, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(fileSize)})
		tw.Write(buf)
	}
	tw.Close()
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	zw.Write(raw.Bytes())
	zw.Close()
	compressed := gz.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(compressed)), nil })
	if err != nil {
		b.Fatal(err)
	}
	return l, raw.Len()
}

// BenchmarkPullUnpack pulls a 5-layer, ~200 MB (uncompressed) image from a loopback registry into an
// empty store: download, digest checks, decompression and unpacking, all layers in parallel.
//
//	go test -run XXX -bench PullUnpack -benchtime 3x ./runtime/imagestore/
func BenchmarkPullUnpack(b *testing.B) {
	var layers []v1.Layer
	var rawTotal int
	var compTotal int64
	for i := range 5 {
		l, n := benchLayer(b, uint64(i+1), 40, 1<<20)
		layers = append(layers, l)
		rawTotal += n
		sz, _ := l.Size()
		compTotal += sz
	}
	reg := newRegistry(b, false, "", "")
	full := reg.push(b, "bench/big:1", imageOfLayers(b, layers, nil))
	b.ResetTimer()
	var total time.Duration
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		s := openStore(b, dir)
		b.StartTimer()
		start := time.Now()
		if _, err := s.Pull(ctxT(b), full, PullOptions{}); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	per := total / time.Duration(b.N)
	mbRaw := float64(rawTotal) / 1e6
	mbComp := float64(compTotal) / 1e6
	b.ReportMetric(mbRaw/per.Seconds(), "MB/s-unpacked")
	b.ReportMetric(mbComp/per.Seconds(), "MB/s-downloaded")
	fmt.Printf("pull+unpack of 5 layers, %.0f MB unpacked (%.0f MB gzip) from a loopback registry: %v per pull, %.0f MB/s unpacked, %.0f MB/s downloaded\n",
		mbRaw, mbComp, per.Round(time.Millisecond), mbRaw/per.Seconds(), mbComp/per.Seconds())
}
