// Package logs reads container logs in the CRI log format (what conmon and every CRI runtime write
// under /var/log/pods) for the agent's /containerLogs API, and rotates them by size through CRI
// ReopenContainerLog, as the kubelet's container log manager does.
package logs

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// Stream names as they appear in a CRI log line.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// CRI log tags: a line is split by the runtime into partial ("P") fragments ended by a full ("F") one.
const (
	tagPartial = 'P'
	tagFull    = 'F'
)

// entry is one parsed line of a CRI log file:
//
//	2026-11-22T01:02:03.456789012Z stdout F hello world
type entry struct {
	ts      time.Time
	stream  string
	partial bool
	content []byte // without the trailing newline
}

var errBadLine = errors.New("not a CRI log line")

// parseLine splits one line (without its newline) of a CRI log. The tag field may carry several
// ':'-separated tags; only the first (P or F) matters today.
func parseLine(line []byte, e *entry) error {
	i := bytes.IndexByte(line, ' ')
	if i < 0 {
		return fmt.Errorf("%w: no timestamp", errBadLine)
	}
	ts, err := time.Parse(time.RFC3339Nano, string(line[:i]))
	if err != nil {
		return fmt.Errorf("%w: timestamp: %v", errBadLine, err)
	}
	rest := line[i+1:]
	j := bytes.IndexByte(rest, ' ')
	if j < 0 {
		return fmt.Errorf("%w: no stream", errBadLine)
	}
	stream := string(rest[:j])
	if stream != Stdout && stream != Stderr {
		return fmt.Errorf("%w: stream %q", errBadLine, stream)
	}
	rest = rest[j+1:]
	k := bytes.IndexByte(rest, ' ')
	var tags, content []byte
	if k < 0 {
		// A full line with empty content may be written without the separating space.
		tags = rest
	} else {
		tags, content = rest[:k], rest[k+1:]
	}
	if len(tags) == 0 || (tags[0] != tagPartial && tags[0] != tagFull) {
		return fmt.Errorf("%w: tag %q", errBadLine, tags)
	}
	e.ts, e.stream, e.partial, e.content = ts, stream, tags[0] == tagPartial, content
	return nil
}
