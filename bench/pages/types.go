package main

import (
	"debug/elf"
	"encoding/binary"
	"sort"
	"strings"
)

// typeSpans charges the type descriptors, which the linker keeps out of the symbol table, to
// the package that declares each type. Starting from the typelinks and the itabs it walks every
// descriptor the runtime can reach (internal/abi's layout, 64-bit) and gives each the bytes up
// to the next descriptor, which takes in its uncommon part, methods and the names placed after.
func typeSpans(f *elf.File, types, end uint64) []span {
	read := func(addr, n uint64) []byte {
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && p.Vaddr <= addr && addr+n <= p.Vaddr+p.Filesz {
				b := make([]byte, n)
				if _, err := p.ReadAt(b, int64(addr-p.Vaddr)); err != nil {
					return nil
				}
				return b
			}
		}
		return nil
	}
	le := binary.LittleEndian
	u64 := func(a uint64) uint64 {
		if b := read(a, 8); b != nil {
			return le.Uint64(b)
		}
		return 0
	}
	u32 := func(a uint64) uint32 {
		if b := read(a, 4); b != nil {
			return le.Uint32(b)
		}
		return 0
	}
	name := func(a uint64) string { // an abi.Name: flags byte, uvarint length, bytes
		b := read(a, 1+binary.MaxVarintLen64)
		if b == nil {
			return ""
		}
		n, k := binary.Uvarint(b[1:])
		if k <= 0 || n > 1<<16 {
			return ""
		}
		if s := read(a+1+uint64(k), n); s != nil {
			return string(s)
		}
		return ""
	}
	owner := map[uint64]string{}
	typeName := map[uint64]string{}
	var queue []uint64
	push := func(t uint64) {
		if t == 0 {
			return
		}
		if _, seen := owner[t]; !seen {
			owner[t] = ""
			queue = append(queue, t)
		}
	}
	if sec := f.Section(".typelink"); sec != nil {
		if b, err := sec.Data(); err == nil {
			for i := 0; i+4 <= len(b); i += 4 {
				push(types + uint64(int32(le.Uint32(b[i:]))))
			}
		}
	}
	if sec := f.Section(".itablink"); sec != nil {
		if b, err := sec.Data(); err == nil {
			for i := 0; i+8 <= len(b); i += 8 {
				itab := le.Uint64(b[i:])
				push(u64(itab))     // Inter
				push(u64(itab + 8)) // Type
			}
		}
	}
	elemOf := map[uint64]uint64{}
	for len(queue) > 0 {
		t := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		hdr := read(t, 48)
		if hdr == nil {
			delete(owner, t)
			continue
		}
		tflag, kind := hdr[20], hdr[23]&31
		typeName[t] = name(types + uint64(int32(le.Uint32(hdr[40:]))))
		if pto := int32(le.Uint32(hdr[44:])); pto > 0 {
			push(types + uint64(pto))
		}
		extra := uint64(0)
		switch kind {
		case 17: // array
			push(u64(t + 48))
			push(u64(t + 56))
			elemOf[t] = u64(t + 48)
			extra = 24
		case 18, 22, 23: // chan, pointer, slice
			push(u64(t + 48))
			elemOf[t] = u64(t + 48)
			extra = 8 + map[byte]uint64{18: 8}[kind]
		case 19: // func
			extra = 8
		case 20: // interface
			ms, n := u64(t+56), u64(t+64)
			for i := uint64(0); i < n && i < 1<<12; i++ {
				if to := int32(u32(ms + 8*i + 4)); to > 0 {
					push(types + uint64(to))
				}
			}
			extra = 32
		case 21: // map
			push(u64(t + 48))
			push(u64(t + 56))
			push(u64(t + 64))
			elemOf[t] = u64(t + 56)
			extra = 64
		case 25: // struct
			fs, n := u64(t+56), u64(t+64)
			for i := uint64(0); i < n && i < 1<<14; i++ {
				push(u64(fs + 24*i + 8))
			}
			extra = 32
		}
		if kind == 19 {
			in, out := uint64(le.Uint16(read(t+48, 2))), uint64(le.Uint16(read(t+50, 2))&0x7fff)
			params := t + 56
			if tflag&1 != 0 {
				params += 16
			}
			for i := uint64(0); i < in+out && i < 1<<10; i++ {
				push(u64(params + 8*i))
			}
		}
		if tflag&1 != 0 { // uncommon: package path and methods
			un := t + 48 + extra
			if p := int32(u32(un)); p != 0 {
				owner[t] = name(types + uint64(p))
			}
			mcount, moff := uint64(le.Uint16(read(un+4, 2))), uint64(u32(un+8))
			for i := uint64(0); i < mcount && i < 1<<12; i++ {
				if mt := int32(u32(un + moff + 16*i + 4)); mt > 0 {
					push(types + uint64(mt))
				}
			}
		}
		if owner[t] == "" && tflag&4 != 0 { // a named type without methods: the string is pkg.Name
			s := strings.TrimPrefix(name(types+uint64(int32(le.Uint32(hdr[40:])))), "*")
			if tflag&2 != 0 {
				s = strings.TrimPrefix(s, "*")
			}
			if i := strings.IndexByte(s, '.'); i > 0 {
				owner[t] = "(types of package " + s[:i] + ")"
			}
		}
	}
	// Unnamed types belong to what they are made of.
	var resolve func(t uint64, depth int) string
	resolve = func(t uint64, depth int) string {
		if o := owner[t]; o != "" || depth > 8 {
			return o
		}
		if e, ok := elemOf[t]; ok {
			return resolve(e, depth+1)
		}
		return ""
	}
	starts := make([]uint64, 0, len(owner))
	for t := range owner {
		starts = append(starts, t)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	var spans []span
	for i, t := range starts {
		hi := end
		if i+1 < len(starts) {
			hi = starts[i+1]
		}
		o := resolve(t, 0)
		if o == "" {
			o = "(type literals)"
		}
		spans = append(spans, span{t, hi, o, "type descriptor " + typeName[t]})
	}
	return spans
}
