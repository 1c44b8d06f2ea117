package testimage

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// NewRegistry is an in-memory OCI distribution registry (go-containerregistry's) that logs nothing.
func NewRegistry() http.Handler {
	return registry.New(registry.Logger(log.New(io.Discard, "", 0)))
}

// Serve starts an in-memory registry on 127.0.0.1 for the test's lifetime, pushes images to it
// and returns its host:port. Keys are repository paths with a tag, without a registry host
// ("e2e-test-images/busybox:1.29-2"); pull them as HOST/KEY over plain HTTP, or send a registry
// such as registry.k8s.io there with a runtime's registry mirror.
func Serve(t testing.TB, images map[string]v1.Image) string {
	t.Helper()
	srv := httptest.NewServer(NewRegistry())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	if err := Push(host, images); err != nil {
		t.Fatal(err)
	}
	return host
}

// Push writes images to the plain-HTTP registry at host; keys as for Serve.
func Push(host string, images map[string]v1.Image) error {
	for key, img := range images {
		ref, err := Ref(host, key)
		if err != nil {
			return err
		}
		if err := remote.Write(ref, img); err != nil {
			return fmt.Errorf("testimage: push %s: %w", ref, err)
		}
	}
	return nil
}

// Ref is the reference of key ("repo/path:tag") in the plain-HTTP registry at host.
func Ref(host, key string) (name.Reference, error) {
	ref, err := name.ParseReference(host+"/"+key, name.Insecure, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("testimage: image key %q: %w", key, err)
	}
	return ref, nil
}

// RepoPath strips the registry host from a full image name: "registry.k8s.io/pause:3.9" →
// "pause:3.9", "docker.io/library/busybox" → "library/busybox:latest". A registry mirror serves
// the result under the mirrored host's name.
func RepoPath(image string) (string, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", err
	}
	if tag, ok := ref.(name.Tag); ok {
		return tag.RepositoryStr() + ":" + tag.TagStr(), nil
	}
	return "", fmt.Errorf("testimage: %q: only tagged names can be served", image)
}
