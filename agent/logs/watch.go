package logs

import (
	"github.com/fsnotify/fsnotify"
)

// watch wakes a follower when anything in dir changes. Without inotify (or out of watches) the
// follower still polls, so errors only cost latency.
func watch(dir string) (<-chan struct{}, func()) {
	wake := make(chan struct{}, 1)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return wake, func() {}
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return wake, func() {}
	}
	go func() {
		for {
			select {
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				select {
				case wake <- struct{}{}:
				default:
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
			}
		}
	}()
	return wake, func() { w.Close() }
}
