package images

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// loopFS makes a small ext4 filesystem on a loop device, mounted in a temp dir; the device and the
// mount go with the test.
func loopFS(t *testing.T, sizeMB int) string {
	testutil.Require(t, "losetup", "mkfs.ext4")
	dir := t.TempDir()
	img := filepath.Join(dir, "fs.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, int64(sizeMB)<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs: %v: %s", err, out)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup --detach %s: %v: %s", dev, err, out)
		}
	})
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	if err := unix.Mount(dev, mnt, "ext4", 0, ""); err != nil {
		t.Fatalf("mount %s: %v", dev, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}

func TestImageGCOnLoopFilesystem(t *testing.T) {
	mnt := loopFS(t, 64)
	f := newFakeImages(mnt)
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	containers := &fakeContainers{}
	g := &ImageGC{Images: f, Containers: containers, Now: func() time.Time { return now },
		Policy: GCPolicy{HighThresholdPercent: 40, LowThresholdPercent: 25, MinAge: 2 * time.Minute}}
	ctx := context.Background()
	const mb = 1 << 20

	// Below the high mark nothing happens.
	f.add("sha256:old", "reg/old:1", 4*mb)
	if res, err := g.GarbageCollect(ctx); err != nil || len(res.Removed) > 0 {
		t.Fatalf("below the mark: %+v %v", res, err)
	}
	// Images used at different times, oldest use first: old, mid, new; "busy" is in use by a container.
	for _, img := range []struct{ id, tag string }{{"sha256:mid", "reg/mid:1"}, {"sha256:new", "reg/new:1"}, {"sha256:busy", "reg/busy:1"}} {
		f.add(img.id, img.tag, 5*mb)
	}
	if err := g.Detect(ctx); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	g.MarkUsed("sha256:mid")
	now = now.Add(time.Minute)
	g.MarkUsed("sha256:new")
	now = now.Add(5 * time.Minute)
	containers.images = []string{"reg/busy:1"}
	f.add("sha256:young", "reg/young:1", 5*mb) // first seen now: MinAge keeps it

	res, err := g.GarbageCollect(ctx)
	t.Logf("usage %d%%, removed %v, freed %d bytes", res.UsagePercent, res.Removed, res.Freed)
	if err != nil {
		t.Fatal(err)
	}
	if res.UsagePercent < 40 {
		t.Fatalf("usage %d%%: the filesystem did not fill", res.UsagePercent)
	}
	if !slices.Equal(res.Removed, []string{"sha256:old", "sha256:mid", "sha256:new"}[:len(res.Removed)]) || len(res.Removed) < 2 {
		t.Fatalf("removed %v: want least recently used first", res.Removed)
	}
	capacity, avail, _, err := g.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if used := 100 - avail*100/capacity; used >= 40 {
		t.Fatalf("usage after gc %d%%", used)
	}
	for _, kept := range []string{"sha256:busy", "sha256:young"} {
		if f.images[kept] == nil {
			t.Fatalf("%s removed", kept)
		}
	}

	// When what may go is not enough, the collector says so.
	g.Policy = GCPolicy{HighThresholdPercent: 1, LowThresholdPercent: 0, MinAge: time.Hour}
	if _, err := g.GarbageCollect(ctx); !errors.Is(err, ErrNotEnoughFreed) {
		t.Fatalf("nothing removable: %v", err)
	}
	// The eviction manager's reclaim asks for everything, ignores the thresholds and is content
	// with what could go; the configured policy stays.
	if err := g.DeleteUnusedImages(ctx); err != nil {
		t.Fatalf("reclaim with nothing removable: %v", err)
	}
	g.Policy = GCPolicy{HighThresholdPercent: 100, MinAge: 2 * time.Minute}
	now = now.Add(5 * time.Minute)
	containers.images = nil
	if err := g.DeleteUnusedImages(ctx); err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	if len(f.images) != 0 || g.Policy.HighThresholdPercent != 100 {
		t.Fatalf("after reclaim: images %v, policy %+v", f.images, g.Policy)
	}
}

// With a real clock, an image a container uses is never a candidate (detection and collection
// share one instant).
func TestImageGCKeepsImagesInUseWithARealClock(t *testing.T) {
	f := newFakeImages("")
	f.add("sha256:used", "reg/used:1", 10)
	f.add("sha256:idle", "reg/idle:1", 10)
	g := &ImageGC{Images: f, Containers: fakeContainers{images: []string{"reg/used:1"}},
		Policy: GCPolicy{HighThresholdPercent: 1, LowThresholdPercent: 0},
		Statfs: func(string) (uint64, uint64, error) { return 100, 0, nil }}
	f.mountpoint = "/images" // Statfs is faked
	for range 3 {
		g.GarbageCollect(context.Background())
	}
	if f.images["sha256:used"] == nil || f.images["sha256:idle"] != nil {
		t.Fatalf("removed %v", f.removed)
	}
}

func TestImageGCKeepsTheSandboxImage(t *testing.T) {
	f := newFakeImages("")
	f.mountpoint = "/images"
	f.add("sha256:pause", "registry.k8s.io/pause:3.10", 10)
	f.add("sha256:idle", "reg/idle:1", 10)
	g := &ImageGC{Images: f, Containers: fakeContainers{}, Keep: []string{"registry.k8s.io/pause:3.10"},
		Policy: GCPolicy{HighThresholdPercent: 1, LowThresholdPercent: 0},
		Statfs: func(string) (uint64, uint64, error) { return 100, 0, nil }}
	g.GarbageCollect(context.Background())
	if f.images["sha256:pause"] == nil || f.images["sha256:idle"] != nil {
		t.Fatalf("removed %v", f.removed)
	}
}

// An image a running container mounts as an image volume is in use, though no container runs it.
func TestImageGCKeepsImageVolumes(t *testing.T) {
	f := newFakeImages("")
	f.mountpoint = "/images" // Statfs is faked
	f.add("sha256:app", "reg/app:1", 10)
	f.add("sha256:data", "reg/data:1", 10)
	f.add("sha256:idle", "reg/idle:1", 10)
	g := &ImageGC{Images: f, Containers: fakeContainers{volumes: []string{"sha256:data"}},
		Policy: GCPolicy{HighThresholdPercent: 1, LowThresholdPercent: 0},
		Statfs: func(string) (uint64, uint64, error) { return 100, 0, nil }}
	for range 3 {
		g.GarbageCollect(context.Background())
	}
	if f.images["sha256:data"] == nil || f.images["sha256:app"] == nil || f.images["sha256:idle"] != nil {
		t.Fatalf("removed %v", f.removed)
	}
}
