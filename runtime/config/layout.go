package config

import "path/filepath"

// The runtime's files under the daemon's dirs. The layout is on disk across restarts and
// upgrades: a change strands what a running node already has.

// RuntimeRoot holds the runtime's persistent files (records, pods' and containers' dirs, images,
// the CNI result cache) under the daemon's --root.
func RuntimeRoot(root string) string { return filepath.Join(root, "runtime") }

// RuntimeState holds the runtime's volatile files (namespace pins, exit files, the OCI runtimes'
// state) under the daemon's --state.
func RuntimeState(state string) string { return filepath.Join(state, "runtime") }

// ImageDir is the image store under the daemon's --root, shared by the daemon and `nodelet image`.
func ImageDir(root string) string { return filepath.Join(RuntimeRoot(root), "images") }

// HandlerRoot is an OCI runtime's own state dir (its --root) under the daemon's --state, so two
// daemons never see each other's containers.
func HandlerRoot(state, handler string) string {
	return filepath.Join(RuntimeState(state), "oci", handler)
}
