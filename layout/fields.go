package layout

import (
	"fmt"
	"sort"
)

// Field names one fixed range of bytes.
type Field struct {
	Name    string
	Offset  uint64 // absolute in a file Map; relative to the record in an Area
	Size    uint64
	Meaning string
}

// Area is a run of Count identical records of Stride bytes, each laid out
// by Fields (offsets relative to the record's start).
type Area struct {
	Name   string
	Offset uint64
	Stride uint64
	Count  uint64
	Fields []Field
}

// Map names the bytes of a whole file: single fields and repeated areas,
// with absolute offsets. Inspectors annotate hexdumps with it.
type Map struct {
	Fields []Field
	Areas  []Area
}

// HeaderFields is the field table of the common header.
func HeaderFields() []Field {
	return []Field{
		{"magic", OffMagic, 8, `"\x89SHMKIT\n": a shmkit file`},
		{"major", OffMajor, 2, "format major version: any other than this build's is rejected"},
		{"minor", OffMinor, 2, "format minor version: compatible additions"},
		{"kind", OffKind, 2, "file kind (1 region, 2 ring, 3 deque, 4 hashmap, 5 heartbeat)"},
		{"flags", OffFlags, 2, "feature flags: bits 0-7 compatible, 8-15 incompatible"},
		{"header_size", OffHeaderSize, 4, "bytes before the kind's area"},
		{"checksum", OffChecksum, 4, "CRC-32C of bytes 0-127 with this field as zero"},
		{"file_size", OffFileSize, 8, "total file size in bytes"},
		{"capacity", OffCapacity, 8, "kind-specific capacity (slots, entries or bytes)"},
		{"slot_size", OffSlotSize, 4, "bytes per slot, where the kind has slots"},
		{"param0", OffParam0, 4, "kind-specific parameter 0"},
		{"param1", OffParam1, 4, "kind-specific parameter 1"},
		{"param2", OffParam2, 4, "kind-specific parameter 2"},
		{"created_ns", OffCreated, 8, "creation time, Unix nanoseconds (wall clock)"},
		{"creator_pid", OffCreatorPID, 4, "pid of the creating process"},
		{"reserved0", OffCreatorPID + 4, 4, "reserved, zero"},
		{"creator_start", OffCreatorStart, 8, "creator's start time, clock ticks since boot"},
		{"creator_boot", OffCreatorBoot, 16, "boot id of the creator's boot"},
		{"reserved1", OffCreatorBoot + 16, ChecksumedSize - (OffCreatorBoot + 16), "reserved, zero"},
		{"ready", OffReady, 4, `"REDY" once initialised; stored last`},
		{"reserved2", OffReady + 4, 4, "reserved, zero"},
		{"generation", OffGeneration, 8, "bumped by every structural repair"},
		{"reserved3", OffGeneration + 8, HeaderSize - (OffGeneration + 8), "reserved, zero"},
	}
}

// Map returns the field table of the whole file the header describes: the
// common header followed by the kind's area at HeaderSize.
func (h *Header) Map() (Map, error) {
	spec, err := SpecOf(h.Kind)
	if err != nil {
		return Map{}, err
	}
	if _, err := spec.BodySize(h.Geometry); err != nil {
		return Map{}, fmt.Errorf("%w: %s: %w", ErrGeometry, h.Kind, err)
	}
	_, body, err := spec.Body(h.Geometry)
	if err != nil {
		return Map{}, fmt.Errorf("%w: %s: %w", ErrGeometry, h.Kind, err)
	}
	base := uint64(h.HeaderSize)
	m := Map{Fields: HeaderFields()}
	for _, f := range body.Fields {
		f.Offset += base
		m.Fields = append(m.Fields, f)
	}
	for _, a := range body.Areas {
		a.Offset += base
		m.Areas = append(m.Areas, a)
	}
	sort.Slice(m.Fields, func(i, j int) bool { return m.Fields[i].Offset < m.Fields[j].Offset })
	return m, nil
}

// Locate names the field containing byte offset off: its name (with the
// record index for areas, e.g. "slot[3].state"), the field, and the field's
// absolute start. ok is false for bytes no field covers.
func (m *Map) Locate(off uint64) (name string, f Field, start uint64, ok bool) {
	i := sort.Search(len(m.Fields), func(i int) bool { return m.Fields[i].Offset+m.Fields[i].Size > off })
	if i < len(m.Fields) && m.Fields[i].Offset <= off {
		return m.Fields[i].Name, m.Fields[i], m.Fields[i].Offset, true
	}
	for _, a := range m.Areas {
		if off < a.Offset || a.Stride == 0 {
			continue
		}
		idx := (off - a.Offset) / a.Stride
		if idx >= a.Count {
			continue
		}
		rel := (off - a.Offset) % a.Stride
		rec := a.Offset + idx*a.Stride
		for _, rf := range a.Fields {
			if rel >= rf.Offset && rel < rf.Offset+rf.Size {
				return fmt.Sprintf("%s[%d].%s", a.Name, idx, rf.Name), rf, rec + rf.Offset, true
			}
		}
	}
	return "", Field{}, 0, false
}
