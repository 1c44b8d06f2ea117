package oci

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestKnownEscapes(t *testing.T) {
	newest := []string{"CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"}
	tests := []struct {
		name, out, wantName, wantVer string
		want                         []string
	}{
		{name: "debian bookworm runc", out: "runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\n",
			wantName: "runc", wantVer: "1.1.5+ds1", want: append([]string{"CVE-2024-21626"}, newest...)},
		{name: "runc 1.1.12", out: "runc version 1.1.12\n", wantName: "runc", wantVer: "1.1.12", want: newest},
		{name: "runc 1.2.7", out: "runc version 1.2.7\n", wantName: "runc", wantVer: "1.2.7", want: newest},
		{name: "runc 1.2.8", out: "runc version 1.2.8\n", wantName: "runc", wantVer: "1.2.8"},
		{name: "runc 1.3.2", out: "runc version 1.3.2\n", wantName: "runc", wantVer: "1.3.2", want: newest},
		{name: "runc 1.3.3", out: "runc version 1.3.3\n", wantName: "runc", wantVer: "1.3.3"},
		{name: "runc 1.4.0-rc.2", out: "runc version 1.4.0-rc.2\n", wantName: "runc", wantVer: "1.4.0-rc.2", want: newest},
		{name: "runc 1.4.0-rc.3", out: "runc version 1.4.0-rc.3\n", wantName: "runc", wantVer: "1.4.0-rc.3"},
		{name: "runc 1.4.0", out: "runc version 1.4.0\n", wantName: "runc", wantVer: "1.4.0"},
		{name: "crun 1.4.3", out: "crun version 1.4.3\ncommit: abc\n", wantName: "crun", wantVer: "1.4.3", want: []string{"CVE-2022-27650"}},
		{name: "crun 0.10", out: "crun version 0.10\n", wantName: "crun", wantVer: "0.10", want: []string{"CVE-2019-18837", "CVE-2022-27650"}},
		{name: "debian bookworm crun", out: "crun version 1.8.1\ncommit: f8a096be\n+SYSTEMD +SELINUX\n", wantName: "crun", wantVer: "1.8.1"},
		{name: "unknown runtime", out: "runsc version release-20231009.0\nspec: 1.1.0-rc.1\n", wantName: "runsc", wantVer: "release-20231009.0"},
		{name: "unreadable version", out: "runc version banana\n", wantName: "runc", wantVer: "banana"},
		{name: "not a version line", out: "usage: runc [flags]\n"},
		{name: "empty", out: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, ver, got := KnownEscapes(tt.out)
			if name != tt.wantName || ver != tt.wantVer || !slices.Equal(got, tt.want) {
				t.Errorf("KnownEscapes = %q %q %v, want %q %q %v", name, ver, got, tt.wantName, tt.wantVer, tt.want)
			}
		})
	}
}

func TestWarnKnownEscapes(t *testing.T) {
	tests := []struct {
		name, script string
		want         string // in the log; "" for no warning
	}{
		{name: "outdated", script: "#!/bin/sh\necho 'runc version 1.1.11'\n", want: "CVE-2024-21626"},
		{name: "current", script: "#!/bin/sh\necho 'runc version 1.4.0'\n"},
		{name: "fails", script: "#!/bin/sh\nexit 3\n", want: "could not read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "runc")
			if err := os.WriteFile(bin, []byte(tt.script), 0o755); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			WarnKnownEscapes(context.Background(), bin, slog.New(slog.NewTextHandler(&buf, nil)))
			got := buf.String()
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("log %q, want %q", got, tt.want)
			}
		})
	}
}
