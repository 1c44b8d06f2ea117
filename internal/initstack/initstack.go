// Package initstack grows the main goroutine's stack once, before the other packages' inits run.
//
// Every linked package's init runs on the main goroutine, which starts with a small stack. Each time
// an init needs more, the runtime copies the stack, and to copy it reads the stack maps of every
// frame on it from the binary's pc tables; an init function of 54 KB (k8s.io/api/core/v1's) is
// one such frame, and what the read faults in of the tables stays resident — in `nodelet runtime`
// about 0.5 MB of pc tables that nothing reads again. Growing the stack to 64 KB here, while only a
// few small frames are on it, takes one copy instead. It has no imports, so it runs among the first
// inits (GODEBUG=inittrace=1 lists it sixth); cmd/nodelet imports it for that effect alone.
package initstack

// frameSize makes grow's frame need a 64 KB stack, which the inits after it stay within.
const frameSize = 56 << 10

//go:noinline
func grow(i int) byte {
	var frame [frameSize]byte
	frame[i] = byte(i)
	return frame[(i*7)%frameSize]
}

var sink byte

func init() { sink = grow(1) }
