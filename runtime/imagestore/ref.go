package imagestore

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// dockerHub is how people write Docker Hub's registry; go-containerregistry calls it index.docker.io.
const dockerHub = "docker.io"

// parseRef reads an image reference the way Docker does: "busybox" is docker.io/library/busybox:latest.
func parseRef(s string, opts ...name.Option) (name.Reference, error) {
	if s == "" {
		return nil, fmt.Errorf("empty image reference: %w", errdefs.ErrInvalidArgument)
	}
	r, err := name.ParseReference(s, opts...)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %v: %w", s, err, errdefs.ErrInvalidArgument)
	}
	return r, nil
}

// canonicalHost folds Docker Hub's aliases into one name, so mirrors and stored names agree.
func canonicalHost(h string) string {
	switch h {
	case "index.docker.io", "registry-1.docker.io", "docker.io":
		return dockerHub
	}
	return h
}

// repoString is the fully qualified repository name as CRI users see it: docker.io/library/busybox.
func repoString(r name.Reference) string {
	c := r.Context()
	return canonicalHost(c.RegistryStr()) + "/" + c.RepositoryStr()
}

// tagString is the fully qualified tag ("docker.io/library/busybox:latest"), or "" for a digest reference.
func tagString(r name.Reference) string {
	if t, ok := r.(name.Tag); ok {
		return repoString(r) + ":" + t.TagStr()
	}
	return ""
}

// isHex reports whether s is non-empty lowercase hex, the form of image IDs and their prefixes.
func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// idHex returns the hex of a full image ID written as "sha256:<hex>" or "<hex>".
func idHex(s string) (string, bool) {
	h := strings.TrimPrefix(s, "sha256:")
	if len(h) == 64 && isHex(h) {
		return h, true
	}
	return "", false
}
