package main

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"
)

// fileToVaddr turns a file offset into the address the ELF image gives it (so PIE builds and
// ASLR do not matter).
func fileToVaddr(f *elf.File, off uint64) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Off <= off && off < p.Off+p.Filesz {
			return p.Vaddr + off - p.Off, true
		}
	}
	return 0, false
}

// symbolSpans returns every address range of the image that can be charged to a function or
// type, sorted: ELF symbols with a size, plus the pclntab and funcdata pieces of every function.
func symbolSpans(f *elf.File) ([]span, error) {
	syms, err := f.Symbols()
	if err != nil {
		return nil, err
	}
	var spans []span
	var gofunc, types, typesEnd uint64
	for _, s := range syms {
		switch s.Name {
		case "go:func.*":
			gofunc = s.Value
		case "runtime.types":
			types = s.Value
		case "go:string.*": // the linker places the strings right after the types
			typesEnd = s.Value
		}
		// Containers of many functions' data are split below instead.
		if s.Size == 0 || s.Name == "runtime.pclntab" || s.Name == "go:func.*" || s.Name == "runtime.functab" ||
			s.Name == "runtime.pctab" || s.Name == "runtime.funcnametab" || s.Name == "runtime.filetab" || s.Name == "runtime.cutab" {
			continue
		}
		spans = append(spans, span{s.Value, s.Value + s.Size, symbolPackage(s.Name), s.Name})
	}
	if types != 0 && typesEnd > types {
		spans = append(spans, typeSpans(f, types, typesEnd)...)
	}
	if pcl := f.Section(".gopclntab"); pcl != nil {
		more, err := pclntabSpans(pcl, gofunc)
		if err != nil {
			return nil, fmt.Errorf("pclntab: %w", err)
		}
		spans = append(spans, more...)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	// Overlaps (aliases, the pieces above against leftover symbols) would count a byte twice.
	out := spans[:0]
	var end uint64
	for _, s := range spans {
		if s.lo < end {
			s.lo = end
		}
		if s.hi <= s.lo {
			continue
		}
		out = append(out, s)
		end = s.hi
	}
	return out, nil
}

// pclntabSpans follows the runtime's layout of the function table (runtime/symtab.go,
// pcHeader and _func, Go 1.20+): each function's _func record with its pcdata and funcdata
// offsets, its name in funcnametab, its pc-value tables in pctab and its funcdata in go:func.*.
// Tables shared between functions go to the first function that points at them; a table's end
// is taken as the next table's start.
func pclntabSpans(sec *elf.Section, gofunc uint64) ([]span, error) {
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	if len(data) < 72 || data[7] != 8 {
		return nil, fmt.Errorf("unexpected header")
	}
	nfunc := le.Uint64(data[8:])
	funcname := le.Uint64(data[32:])
	pctab := le.Uint64(data[56:])
	pcln := le.Uint64(data[64:])
	base := sec.Addr

	var spans []span
	type start struct {
		off         uint64
		owner, name string
	}
	var pcStarts, fdStarts []start
	var nameStarts []start
	ftab := data[pcln:]
	for i := uint64(0); i < nfunc; i++ {
		funcOff := uint64(le.Uint32(ftab[8*i+4:]))
		fn := ftab[funcOff:]
		nameOff := uint64(le.Uint32(fn[4:]))
		nameAt := funcname + nameOff
		nameEnd := nameAt
		for nameEnd < uint64(len(data)) && data[nameEnd] != 0 {
			nameEnd++
		}
		fname := string(data[nameAt:nameEnd])
		owner := symbolPackage(fname)
		nameStarts = append(nameStarts, start{nameAt, owner, "name of " + fname})
		npcdata := uint64(le.Uint32(fn[28:]))
		nfuncdata := uint64(fn[43])
		recLen := 44 + 4*npcdata + 4*nfuncdata
		spans = append(spans, span{base + pcln + funcOff, base + pcln + funcOff + recLen, owner, "_func of " + fname})
		for _, o := range []uint32{le.Uint32(fn[16:]), le.Uint32(fn[20:]), le.Uint32(fn[24:])} {
			if o != 0 {
				pcStarts = append(pcStarts, start{pctab + uint64(o), owner, "pc tables of " + fname})
			}
		}
		for k := uint64(0); k < npcdata; k++ {
			if o := le.Uint32(fn[44+4*k:]); o != 0 {
				pcStarts = append(pcStarts, start{pctab + uint64(o), owner, "pc tables of " + fname})
			}
		}
		for k := uint64(0); k < nfuncdata; k++ {
			if o := le.Uint32(fn[44+4*npcdata+4*k:]); o != ^uint32(0) && gofunc != 0 {
				fdStarts = append(fdStarts, start{uint64(o), owner, "funcdata of " + fname})
			}
		}
	}
	// The function table itself: 8 bytes per function, in text order.
	for i := uint64(0); i < nfunc; i++ {
		funcOff := uint64(le.Uint32(ftab[8*i+4:]))
		fn := ftab[funcOff:]
		nameOff := uint64(le.Uint32(fn[4:]))
		nameAt := funcname + nameOff
		nameEnd := nameAt
		for data[nameEnd] != 0 {
			nameEnd++
		}
		fname := string(data[nameAt:nameEnd])
		spans = append(spans, span{base + pcln + 8*i, base + pcln + 8*i + 8, symbolPackage(fname), "functab entry of " + fname})
	}
	ranges := func(starts []start, origin, limit uint64) {
		sort.SliceStable(starts, func(i, j int) bool { return starts[i].off < starts[j].off })
		for i, s := range starts {
			if i > 0 && starts[i-1].off == s.off {
				continue
			}
			end := limit
			for j := i + 1; j < len(starts); j++ {
				if starts[j].off > s.off {
					end = starts[j].off
					break
				}
			}
			spans = append(spans, span{origin + s.off, origin + end, s.owner, s.name})
		}
	}
	ranges(nameStarts, base, funcname+uint64(len(data[funcname:])))
	ranges(pcStarts, base, pcln)
	if gofunc != 0 {
		// go:func.* ends where rodata's next symbol starts; cap each piece to keep the last sane.
		last := uint64(0)
		for _, s := range fdStarts {
			last = max(last, s.off)
		}
		ranges(fdStarts, gofunc, last+64)
	}
	// funcnametab's end is the cutab; clip names so they do not swallow it.
	cu := le.Uint64(data[40:])
	for i := range spans {
		if spans[i].lo >= base+funcname && spans[i].lo < base+cu && spans[i].hi > base+cu {
			spans[i].hi = base + cu
		}
	}
	return spans, nil
}
