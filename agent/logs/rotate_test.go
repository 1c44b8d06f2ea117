package logs

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime has one running container whose log is path; reopen makes a new empty file there.
type fakeRuntime struct {
	path      string
	reopenErr error
	reopens   int
	statuses  int
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{Id: "c1"}}}, nil
}

func (f *fakeRuntime) ContainerStatus(context.Context, *runtimeapi.ContainerStatusRequest, ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	f.statuses++
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: "c1", LogPath: f.path}}, nil
}

func (f *fakeRuntime) ReopenContainerLog(context.Context, *runtimeapi.ReopenContainerLogRequest, ...grpc.CallOption) (*runtimeapi.ReopenContainerLogResponse, error) {
	f.reopens++
	if f.reopenErr != nil {
		return nil, f.reopenErr
	}
	return &runtimeapi.ReopenContainerLogResponse{}, os.WriteFile(f.path, nil, 0o644)
}

func TestRotator(t *testing.T) {
	tests := []struct {
		name        string
		size        int
		reopenErr   error
		wantErr     bool
		wantRotated int
		wantLive    int
	}{
		{name: "small log stays", size: 10, wantRotated: 0, wantLive: 10},
		{name: "big log rotates", size: 200, wantRotated: 1, wantLive: 0},
		{name: "failed reopen puts the file back", size: 200, reopenErr: errors.New("boom"), wantErr: true, wantRotated: 0, wantLive: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "0.log")
			os.WriteFile(path, []byte(strings.Repeat("x", tc.size)), 0o644)
			rt := &fakeRuntime{path: path, reopenErr: tc.reopenErr}
			r, err := NewRotator(rt, "100", 3)
			if err != nil {
				t.Fatal(err)
			}
			err = r.RotateOnce(context.Background())
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			rotated, _ := RotatedFiles(path)
			if len(rotated) != tc.wantRotated {
				t.Fatalf("rotated = %v", rotated)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Size() != int64(tc.wantLive) {
				t.Fatalf("live log: %v, %v", fi, err)
			}
		})
	}
}

func TestRotatorKeepsMaxFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	rt := &fakeRuntime{path: path}
	r, err := NewRotator(rt, "1Ki", 3)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	r.now = func() time.Time { now = now.Add(time.Second); return now }
	for i := range 5 {
		os.WriteFile(path, []byte(strings.Repeat(string(rune('a'+i)), 2048)), 0o644)
		if err := r.RotateOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	rotated, _ := RotatedFiles(path)
	if len(rotated) != 2 {
		t.Fatalf("want 2 rotated files (3 with the live one), got %v", rotated)
	}
	// The newest survive; all but the newest rotated file are compressed.
	if !strings.HasSuffix(rotated[0], ".gz") || strings.HasSuffix(rotated[1], ".gz") {
		t.Fatalf("compression: %v", rotated)
	}
	b, _ := os.ReadFile(rotated[1])
	if b[0] != 'e' {
		t.Fatalf("newest rotated file holds %q", b[:1])
	}
	zf, _ := os.Open(rotated[0])
	defer zf.Close()
	zr, err := gzip.NewReader(zf)
	if err != nil {
		t.Fatal(err)
	}
	older, _ := io.ReadAll(zr)
	if len(older) != 2048 || older[0] != 'd' {
		t.Fatalf("compressed file holds %d bytes of %q", len(older), older[:1])
	}
}

// A container's log path is asked once: later passes stat the file they already know.
func TestRotatorAsksEachContainerOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	os.WriteFile(path, []byte("x"), 0o644)
	rt := &fakeRuntime{path: path}
	r, err := NewRotator(rt, "100", 3)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := r.RotateOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if rt.statuses != 1 {
		t.Errorf("ContainerStatus asked %d times, want 1", rt.statuses)
	}
}

func TestNewRotatorRejects(t *testing.T) {
	for _, tc := range []struct {
		size  string
		files int32
	}{{"abc", 5}, {"0", 5}, {"10Mi", 1}} {
		if _, err := NewRotator(&fakeRuntime{}, tc.size, tc.files); err == nil {
			t.Errorf("NewRotator(%q, %d) accepted", tc.size, tc.files)
		}
	}
}
