package imagestore

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/gzip"

	"github.com/nodelet/nodelet/test/harness/testutil"
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
// empty store: download, digest checks, decompression and unpacking. It then has containerd (from
// Debian, its own root and socket, started fresh for every pull) pull and unpack the same image with
// `ctr images pull`, and prints both figures and their ratio.
//
//	go test -run XXX -bench PullUnpack -benchtime 3x ./runtime/imagestore/
func BenchmarkPullUnpack(b *testing.B) {
	testutil.Require(b, "containerd", "ctr")
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
	mbRaw, mbComp := float64(rawTotal)/1e6, float64(compTotal)/1e6

	var ours, theirs time.Duration
	b.Run("nodelet", func(b *testing.B) {
		var total time.Duration
		for range b.N {
			s := openStore(b, b.TempDir())
			start := time.Now()
			if _, err := s.Pull(ctxT(b), full, PullOptions{}); err != nil {
				b.Fatal(err)
			}
			total += time.Since(start)
		}
		ours = total / time.Duration(b.N)
		b.ReportMetric(mbRaw/ours.Seconds(), "MB/s-unpacked")
		b.ReportMetric(mbComp/ours.Seconds(), "MB/s-downloaded")
	})
	b.Run("containerd", func(b *testing.B) {
		var total time.Duration
		for range b.N {
			total += containerdPull(b, full)
		}
		theirs = total / time.Duration(b.N)
		b.ReportMetric(mbRaw/theirs.Seconds(), "MB/s-unpacked")
	})
	fmt.Printf("pull+unpack, 5 layers, %.0f MB unpacked (%.0f MB gzip), loopback registry:\n", mbRaw, mbComp)
	fmt.Printf("  nodelet    %8v per pull  %5.0f MB/s unpacked  %5.0f MB/s downloaded\n", ours.Round(time.Millisecond), mbRaw/ours.Seconds(), mbComp/ours.Seconds())
	if theirs > 0 {
		fmt.Printf("  containerd %8v per pull  %5.0f MB/s unpacked (ctr images pull, includes ctr start-up)\n", theirs.Round(time.Millisecond), mbRaw/theirs.Seconds())
		fmt.Printf("  ratio nodelet/containerd: %.2f\n", ours.Seconds()/theirs.Seconds())
	}
}

// containerdPull starts a private containerd, times one `ctr images pull` (which unpacks into its
// overlayfs snapshotter), and stops it.
func containerdPull(b *testing.B, ref string) time.Duration {
	b.StopTimer() // only the pull counts in ns/op, not containerd's start and stop
	defer b.StartTimer()
	dir, err := os.MkdirTemp("", "nodelet-bench-ctrd-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "c.sock")
	cfg := fmt.Sprintf("version = 2\nroot = %q\nstate = %q\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = %q\n",
		filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock)
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	d := exec.Command(testutil.LookPath("containerd"), "--config", filepath.Join(dir, "config.toml"))
	var logs bytes.Buffer
	d.Stdout, d.Stderr = &logs, &logs
	if err := d.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		d.Process.Signal(syscall.SIGTERM)
		d.Wait()
		for _, m := range testutil.MountsUnder(dir) {
			syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}()
	ctr := func(args ...string) error {
		out, err := exec.Command(testutil.LookPath("ctr"), append([]string{"-a", sock, "-n", "bench"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ctr %v: %v: %s", args, err, out)
		}
		return nil
	}
	for i := 0; ctr("version") != nil; i++ {
		if i > 200 {
			b.Fatalf("containerd did not start: %s", logs.String())
		}
		time.Sleep(25 * time.Millisecond)
	}
	b.StartTimer()
	start := time.Now()
	err = ctr("images", "pull", "--plain-http", ref)
	took := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	return took
}
