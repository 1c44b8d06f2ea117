package oomwatcher

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

type fakeRecorder struct{ events []string }

func (r *fakeRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	ref := obj.(*v1.ObjectReference)
	r.events = append(r.events, fmt.Sprintf("%s/%s %s %s: %s", ref.Kind, ref.Name, typ, reason, fmt.Sprintf(format, args...)))
}

// Records as /dev/kmsg gives them, from kernels 5.x/6.x (a system OOM, then a container's at its
// limit under /kubepods) and 4.x (no oom-kill summary line).
var records = []string{
	"6,1021,5678901,-;stress invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0\n SUBSYSTEM=cpu\n",
	"6,1022,5678902,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice/user-0.slice/session-3.scope,task=stress,pid=4242,uid=0\n",
	"3,1023,5678903,-;Out of memory: Killed process 4242 (stress) total-vm:1052776kB, anon-rss:1011844kB, file-rss:4kB, shmem-rss:0kB, UID:0 pgtables:2024kB oom_score_adj:0\n",
	"6,1030,5679000,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=abc,mems_allowed=0,oom_memcg=/kubepods/burstable/pod1234/abc,task_memcg=/kubepods/burstable/pod1234/abc,task=java,pid=777,uid=1000\n",
	"3,1031,5679001,-;Memory cgroup out of memory: Killed process 777 (java) total-vm:20000kB, anon-rss:10000kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:100kB oom_score_adj:-997\n",
	"3,1040,5680000,-;Out of memory: Kill process 999 (old-kernel) score 900 or sacrifice child\n",
	"4,1041,5680001,-;not a kill: Killed process words elsewhere\n",
	"garbage without a prefix",
}

func TestParse(t *testing.T) {
	var p parser
	var kills []Kill
	for _, r := range records {
		msg, ok := recordText([]byte(r))
		if !ok {
			continue
		}
		if strings.Contains(msg, "\n") {
			t.Fatalf("dictionary lines kept: %q", msg)
		}
		if k, done := p.line(msg); done {
			kills = append(kills, k)
		}
	}
	want := []Kill{
		{PID: 4242, Comm: "stress", Memcg: "/user.slice/user-0.slice/session-3.scope", Global: true},
		{PID: 777, Comm: "java", Memcg: "/kubepods/burstable/pod1234/abc"},
		{PID: 999, Comm: "old-kernel", Global: true},
	}
	if fmt.Sprint(kills) != fmt.Sprint(want) {
		t.Fatalf("kills\n got %+v\nwant %+v", kills, want)
	}
}

func TestSystemKills(t *testing.T) {
	for _, c := range []struct {
		root string
		k    Kill
		want bool
	}{
		{"/kubepods", Kill{Memcg: "/kubepods/burstable/pod1/c1"}, false},
		{"/kubepods", Kill{Memcg: "/kubepods"}, false},
		{"/kubepods/", Kill{Memcg: "/kubepods/besteffort/pod2/c2"}, false},
		{"kubepods", Kill{Memcg: "/kubepods/pod3/c3"}, false},
		{"/kubepods", Kill{Memcg: "/kubepods-other/x"}, true},
		{"/kubepods", Kill{Memcg: "/system.slice/sshd.service"}, true},
		{"/kubepods", Kill{Memcg: "/"}, true},
		{"", Kill{Memcg: "/"}, true},
		{"", Kill{Memcg: "/system.slice/x"}, false},
		{"/kubepods", Kill{Global: true}, true},
		{"/kubepods", Kill{}, false},
	} {
		w := &Watcher{CgroupRoot: c.root}
		if got := w.systemKill(c.k); got != c.want {
			t.Errorf("root %q kill %+v: system %v, want %v", c.root, c.k, got, c.want)
		}
	}
}

func TestEvents(t *testing.T) {
	rec := &fakeRecorder{}
	w := &Watcher{Node: &v1.ObjectReference{Kind: "Node", Name: "n1", UID: "n1"}, CgroupRoot: "/kubepods", Recorder: rec}
	var p parser
	for _, r := range records {
		w.handle(&p, []byte(r), slog.Default())
	}
	want := []string{
		"Node/n1 Warning SystemOOM: System OOM encountered, victim process: stress, pid: 4242",
		"Node/n1 Warning SystemOOM: System OOM encountered, victim process: old-kernel, pid: 999",
	}
	if fmt.Sprint(rec.events) != fmt.Sprint(want) {
		t.Fatalf("events\n got %q\nwant %q", rec.events, want)
	}
}

// The real kernel log: opened, read from its end and left when ctx ends, without an error.
func TestReadKmsg(t *testing.T) {
	if _, err := os.Stat("/dev/kmsg"); err != nil {
		t.Fatalf("/dev/kmsg: %v (the test runs as root on Linux)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rec := &fakeRecorder{}
	done := make(chan error, 1)
	go func() {
		done <- (&Watcher{Node: &v1.ObjectReference{Kind: "Node", Name: "n1"}, CgroupRoot: "/kubepods", Recorder: rec}).Run(ctx)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		if ctx.Err() == nil {
			t.Fatal("the watcher stopped before its context ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not stop when its context ended")
	}
}
