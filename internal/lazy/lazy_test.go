package lazy

import (
	"sync"
	"sync/atomic"
	"testing"
)

var built atomic.Int32

var answer = Value[int]{New: func() int { built.Add(1); return 42 }}

func TestBuiltOnceOnFirstGet(t *testing.T) {
	if n := built.Load(); n != 0 {
		t.Fatalf("built %d times before the first Get", n)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v := answer.Get(); v != 42 {
				t.Errorf("Get = %d", v)
			}
		}()
	}
	wg.Wait()
	if n := built.Load(); n != 1 {
		t.Errorf("built %d times, want once", n)
	}
}
