package userns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/nodelet/nodelet/internal/regularfile"
)

// The IDs pods may be given, as the kubelet finds them: the subordinate IDs of a "kubelet" user
// when the host has one and getsubids can read them, else every ID from 65536 up (the host's
// first 65536, where its own users and groups live, are never handed out).
const (
	subIDsUser      = "kubelet"
	defaultFirstID  = 1 << 16
	defaultIDLength = 1<<32 - defaultFirstID
	getsubidsBound  = 4 << 10
	getsubidsExpiry = 10 * time.Second
)

// hostIDs returns the first ID and the number of IDs pods may be given.
func hostIDs() (first, length uint32, err error) {
	if ok, err := hasUser(passwdFile, subIDsUser); err != nil {
		return 0, 0, fmt.Errorf("look up user %q: %w", subIDsUser, err)
	} else if !ok {
		return defaultFirstID, defaultIDLength, nil
	}
	cmd, err := exec.LookPath("getsubids")
	if err != nil {
		// As the kubelet: without the tool the user's entries cannot be read.
		return defaultFirstID, defaultIDLength, nil
	}
	uids, err := runGetsubids(cmd, subIDsUser)
	if err != nil {
		return 0, 0, fmt.Errorf("subordinate uids of user %q: %w", subIDsUser, err)
	}
	gids, err := runGetsubids(cmd, "-g", subIDsUser)
	if err != nil {
		return 0, 0, fmt.Errorf("subordinate gids of user %q: %w", subIDsUser, err)
	}
	if uids != gids {
		return 0, 0, fmt.Errorf("the subordinate uids and gids of user %q differ", subIDsUser)
	}
	return parseGetsubids(uids)
}

// passwdFile is where users are looked up, and passwdBound the most of it read.
const (
	passwdFile  = "/etc/passwd"
	passwdBound = 16 << 20
)

// hasUser reports whether the passwd file names the user. It reads the file as the kubelet's
// release build (static, no cgo) does, not through NSS: a cgo build's lookup loaded the NSS
// modules into the agent for good, 0.7 MB of its resident memory, to ask this once.
func hasUser(passwd, name string) (bool, error) {
	data, err := regularfile.Read(passwd, passwdBound)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if n, _, ok := strings.Cut(line, ":"); ok && n == name {
			return true, nil
		}
	}
	return false, nil
}

func runGetsubids(cmd string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), getsubidsExpiry)
	defer cancel()
	var out strings.Builder
	c := exec.CommandContext(ctx, cmd, args...)
	c.Stdout = &boundedWriter{w: &out, left: getsubidsBound}
	if err := c.Run(); err != nil {
		return "", err
	}
	return out.String(), nil
}

// parseGetsubids reads getsubids' one line, "0: kubelet 65536 2147483648": index, user, first
// ID, count.
func parseGetsubids(s string) (first, length uint32, err error) {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	if len(lines) != 1 {
		return 0, 0, fmt.Errorf("getsubids printed %d lines, want one range", len(lines))
	}
	f := strings.Fields(lines[0])
	if len(f) != 4 {
		return 0, 0, fmt.Errorf("getsubids line %q: want 4 fields", lines[0])
	}
	a, err := strconv.ParseUint(f[2], 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("getsubids line %q: %w", lines[0], err)
	}
	b, err := strconv.ParseUint(f[3], 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("getsubids line %q: %w", lines[0], err)
	}
	return uint32(a), uint32(b), nil
}

// boundedWriter keeps at most left bytes and fails past them, so a runaway tool cannot fill memory.
type boundedWriter struct {
	w    *strings.Builder
	left int
}

func (b *boundedWriter) Write(p []byte) (int, error) {
	if len(p) > b.left {
		return 0, errors.New("output too long")
	}
	b.left -= len(p)
	return b.w.Write(p)
}
