package lockedthread

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// Locking the main goroutine to the main thread in init keeps it there through TestMain, so
// the test below can run Go's goroutine body on the main thread itself, which a scheduler
// would give it only by chance.
func init() { runtime.LockOSThread() }

var onMain struct {
	mainTID, workTID int
	unlocked         bool
}

func TestMain(m *testing.M) {
	onMain.mainTID = unix.Gettid()
	done := make(chan struct{})
	runtime.LockOSThread() // as Go's goroutine does before run
	run(func() {
		onMain.workTID = unix.Gettid()
		close(done)
	})
	<-done
	// run gave back the lock it was handed; the one init took is still held.
	onMain.unlocked = unix.Gettid() == onMain.mainTID
	os.Exit(m.Run())
}

func TestWorkStartedOnTheMainThreadMovesOff(t *testing.T) {
	if onMain.mainTID != os.Getpid() {
		t.Fatalf("TestMain ran on thread %d, not the main thread %d: the test proves nothing", onMain.mainTID, os.Getpid())
	}
	if onMain.workTID == 0 || onMain.workTID == os.Getpid() {
		t.Fatalf("work ran on thread %d, the main thread is %d", onMain.workTID, os.Getpid())
	}
	if !onMain.unlocked {
		t.Fatal("the main goroutine left the main thread")
	}
}

func TestRunReturnsTheErrorFromAnotherThread(t *testing.T) {
	want := errors.New("from the thread")
	var tid int
	err := Run(func() error {
		tid = unix.Gettid()
		return want
	})
	if err != want {
		t.Fatalf("Run returned %v, want %v", err, want)
	}
	if tid == os.Getpid() {
		t.Fatal("work ran on the main thread")
	}
}
