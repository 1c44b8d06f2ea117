package imagestore

import "golang.org/x/sys/unix"

func syscallSyncfs(fd int) error { return unix.Syncfs(fd) }
