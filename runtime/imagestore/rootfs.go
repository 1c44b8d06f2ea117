package imagestore

import ocispec "github.com/opencontainers/image-spec/specs-go/v1"

// Rootfs is a container's writable root filesystem prepared from an image, and what the
// runtime needs to know of that image to build the container's OCI spec.
type Rootfs struct {
	// Path is the mounted overlay the container's OCI spec points at.
	Path string
	// UpperDir holds what the container writes (the overlay's upper dir): its writable layer's
	// usage is measured there.
	UpperDir string
	// ImageID is the digest of the image config ("sha256:…"), as CRI reports it.
	ImageID string
	// ImageRef is the repo digest (name@sha256:…) when known, else ImageID.
	ImageRef string
	// Config holds the user, env, entrypoint, cmd, working dir and volumes the image asks for.
	Config ocispec.ImageConfig
}
