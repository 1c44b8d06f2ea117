package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

type passwdEntry struct {
	name     string
	uid, gid uint32
}

type groupEntry struct {
	name    string
	gid     uint32
	members []string
}

// resolveUser computes the process user from the security context and the image's USER, looking
// names up in the image's own /etc/passwd and /etc/group (see readImageFile: the image's
// symlinks must not lead to the host's files, nor its special files block the daemon).
func resolveUser(rootfs string, sc *runtimeapi.LinuxContainerSecurityContext, imageUser string) (specs.User, error) {
	if sc.GetRunAsGroup() != nil && sc.GetRunAsUser() == nil && sc.GetRunAsUsername() == "" {
		return specs.User{}, fmt.Errorf("run_as_group without run_as_user or run_as_username: %w", errdefs.ErrInvalidArgument)
	}
	userPart, groupPart, _ := strings.Cut(imageUser, ":")
	if sc.GetRunAsUser() != nil {
		userPart = strconv.FormatInt(sc.GetRunAsUser().GetValue(), 10)
		groupPart = ""
	} else if sc.GetRunAsUsername() != "" {
		userPart = sc.GetRunAsUsername()
		groupPart = ""
	}
	if sc.GetRunAsGroup() != nil {
		groupPart = strconv.FormatInt(sc.GetRunAsGroup().GetValue(), 10)
	}
	passwd, err := readPasswd(rootfs)
	if err != nil {
		return specs.User{}, err
	}
	groups, err := readGroups(rootfs)
	if err != nil {
		return specs.User{}, err
	}

	var u specs.User
	name := ""
	switch {
	case userPart == "":
		name = "root"
	case isNumeric(userPart):
		v, err := strconv.ParseUint(userPart, 10, 32)
		if err != nil {
			return u, fmt.Errorf("user %q: %w", userPart, errdefs.ErrInvalidArgument)
		}
		u.UID = uint32(v)
		for _, p := range passwd {
			if p.uid == u.UID {
				u.GID, name = p.gid, p.name
				break
			}
		}
	default:
		found := false
		for _, p := range passwd {
			if p.name == userPart {
				u.UID, u.GID, name, found = p.uid, p.gid, p.name, true
				break
			}
		}
		if !found {
			return u, fmt.Errorf("user %q is not in the image's /etc/passwd: %w", userPart, errdefs.ErrFailedPrecondition)
		}
	}
	if groupPart != "" {
		if isNumeric(groupPart) {
			v, err := strconv.ParseUint(groupPart, 10, 32)
			if err != nil {
				return u, fmt.Errorf("group %q: %w", groupPart, errdefs.ErrInvalidArgument)
			}
			u.GID = uint32(v)
		} else {
			found := false
			for _, g := range groups {
				if g.name == groupPart {
					u.GID, found = g.gid, true
					break
				}
			}
			if !found {
				return u, fmt.Errorf("group %q is not in the image's /etc/group: %w", groupPart, errdefs.ErrFailedPrecondition)
			}
		}
	}
	// The primary group is listed among the supplementary ones too, as containerd and CRI-O do and
	// as critest's SupplementalGroupsPolicy specs expect of ContainerStatus.User.
	seen := map[uint32]bool{}
	add := func(g uint32) {
		if !seen[g] {
			seen[g] = true
			u.AdditionalGids = append(u.AdditionalGids, g)
		}
	}
	add(u.GID)
	if name != "" && sc.GetSupplementalGroupsPolicy() != runtimeapi.SupplementalGroupsPolicy_Strict {
		for _, g := range groups {
			for _, m := range g.members {
				if m == name {
					add(g.gid)
				}
			}
		}
	}
	for _, g := range sc.GetSupplementalGroups() {
		if g < 0 || g > int64(^uint32(0)) {
			return u, fmt.Errorf("supplemental group %d: %w", g, errdefs.ErrInvalidArgument)
		}
		add(uint32(g))
	}
	// Linux keeps a process's groups sorted (setgroups sorts them); gVisor keeps them in the
	// order given, so `id -G` in a runsc container would list them in this function's order.
	slices.Sort(u.AdditionalGids)
	return u, nil
}

func isNumeric(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// readImageRecords reads a colon-separated file of the image (passwd, group) as its fields per
// line, skipping blanks and comments. A missing file has no records; an unsafe one is an error.
func readImageRecords(rootfs, name string) ([][]string, error) {
	b, err := readImageFile(rootfs, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.Split(line, ":"))
	}
	return out, nil
}

func readPasswd(rootfs string) ([]passwdEntry, error) {
	recs, err := readImageRecords(rootfs, "/etc/passwd")
	var out []passwdEntry
	for _, f := range recs {
		if len(f) < 4 {
			continue
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, passwdEntry{name: f[0], uid: uint32(uid), gid: uint32(gid)})
	}
	return out, err
}

func readGroups(rootfs string) ([]groupEntry, error) {
	recs, err := readImageRecords(rootfs, "/etc/group")
	var out []groupEntry
	for _, f := range recs {
		if len(f) < 3 {
			continue
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			continue
		}
		g := groupEntry{name: f[0], gid: uint32(gid)}
		if len(f) > 3 && f[3] != "" {
			g.members = strings.Split(f[3], ",")
		}
		out = append(out, g)
	}
	return out, err
}
