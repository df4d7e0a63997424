package layout

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
)

// Format version written by this package.
const (
	MajorVersion = 3
	MinorVersion = 0
)

// Magic opens every shmkit file. The high first byte catches 7-bit
// transports, the trailing newline catches line-ending conversion (as PNG's).
const Magic = "\x89SHMKIT\n"

// Header geometry. These constants are part of the format.
const (
	HeaderSize     = 256 // bytes of the common header in format 3 (as in formats 1 and 2)
	ChecksumedSize = 128 // bytes [0, ChecksumedSize) are immutable and checksummed
	CacheLine      = 64  // alignment unit of every area in a shmkit file
)

// Offsets of the common header's fields. These constants are part of the format.
const (
	OffMagic        = 0
	OffMajor        = 8
	OffMinor        = 10
	OffKind         = 12
	OffFlags        = 14
	OffHeaderSize   = 16
	OffChecksum     = 20
	OffFileSize     = 24
	OffCapacity     = 32
	OffSlotSize     = 40
	OffParam0       = 44
	OffParam1       = 48
	OffParam2       = 52
	OffCreated      = 56
	OffCreatorPID   = 64
	OffCreatorStart = 72
	OffCreatorBoot  = 80
	OffReady        = 128
	OffGeneration   = 136
)

// ReadyValue is the ready word of a fully initialised file ("REDY" read as
// little-endian bytes). Any other value means "not ready".
const ReadyValue uint32 = 0x59444552

// Flag bits. Bits 0-7 are compatible, bits 8-15 incompatible.
const (
	flagsIncompatMask uint16 = 0xff00
	knownIncompat     uint16 = 0 // format 3.0 defines no incompatible flags
)

// MaxFileSize bounds the size any header may declare (1 TiB): far beyond any
// sane shared-memory file, small enough that no size arithmetic can overflow.
const MaxFileSize = 1 << 40

// Errors returned by decoding and validation. Each error returned by this
// package wraps exactly one of them, so errors.Is tells the cause.
var (
	ErrInvalid         = errors.New("layout: invalid header")
	ErrTooShort        = errors.New("layout: too short for a shmkit header")
	ErrBadMagic        = errors.New("layout: not a shmkit file (bad magic)")
	ErrVersionMismatch = errors.New("layout: unsupported format version")
	ErrChecksum        = errors.New("layout: header checksum mismatch")
	ErrUnknownKind     = errors.New("layout: unknown file kind")
	ErrWrongKind       = errors.New("layout: wrong file kind")
	ErrGeometry        = errors.New("layout: geometry does not fit the file")
)

// Geometry is what a file kind needs to know about its size. Params are
// kind-specific (their names are in the kind's Spec).
type Geometry struct {
	Capacity uint64
	SlotSize uint32
	Params   [3]uint32
}

// Creator identifies the process that created a file, for humans and for
// liveness checks of a file that never became ready.
type Creator struct {
	PID        uint32
	StartTicks uint64   // process start time, clock ticks since boot
	BootID     [16]byte // the boot the pid and start time belong to
}

// Header is the decoded common header.
type Header struct {
	Major, Minor uint16
	Kind         Kind
	Flags        uint16
	HeaderSize   uint32
	Checksum     uint32
	FileSize     uint64
	Geometry     Geometry
	CreatedNano  int64
	Creator      Creator
	// Mutable words, as they were when the bytes were read. Readers that
	// need them live use atomics at OffReady and OffGeneration instead.
	Ready      uint32
	Generation uint64
}

// NewHeader returns the header of a new file of the given kind and geometry,
// with FileSize computed from the kind's body size. It fails if the geometry
// is invalid for the kind.
func NewHeader(kind Kind, g Geometry, created int64, c Creator) (Header, error) {
	h := Header{
		Major: MajorVersion, Minor: MinorVersion, Kind: kind,
		HeaderSize: HeaderSize, Geometry: g, CreatedNano: created, Creator: c,
	}
	size, err := h.expectedFileSize()
	if err != nil {
		return Header{}, err
	}
	h.FileSize = size
	return h, nil
}

// IsReady reports whether the ready word (as decoded) says the file is
// initialised.
func (h *Header) IsReady() bool { return h.Ready == ReadyValue }

// Encode writes the header's immutable fields and checksum into b, which must
// be at least HeaderSize bytes. It leaves the ready word and generation
// alone: the creator publishes readiness itself, last, with an atomic store.
func (h *Header) Encode(b []byte) error {
	if len(b) < HeaderSize {
		return fmt.Errorf("%w: %d bytes", ErrTooShort, len(b))
	}
	le := binary.LittleEndian
	copy(b[OffMagic:], Magic)
	le.PutUint16(b[OffMajor:], h.Major)
	le.PutUint16(b[OffMinor:], h.Minor)
	le.PutUint16(b[OffKind:], uint16(h.Kind))
	le.PutUint16(b[OffFlags:], h.Flags)
	le.PutUint32(b[OffHeaderSize:], h.HeaderSize)
	le.PutUint64(b[OffFileSize:], h.FileSize)
	le.PutUint64(b[OffCapacity:], h.Geometry.Capacity)
	le.PutUint32(b[OffSlotSize:], h.Geometry.SlotSize)
	le.PutUint32(b[OffParam0:], h.Geometry.Params[0])
	le.PutUint32(b[OffParam1:], h.Geometry.Params[1])
	le.PutUint32(b[OffParam2:], h.Geometry.Params[2])
	le.PutUint64(b[OffCreated:], uint64(h.CreatedNano))
	le.PutUint32(b[OffCreatorPID:], h.Creator.PID)
	le.PutUint32(b[OffCreatorPID+4:], 0)
	le.PutUint64(b[OffCreatorStart:], h.Creator.StartTicks)
	copy(b[OffCreatorBoot:OffCreatorBoot+16], h.Creator.BootID[:])
	clear(b[OffCreatorBoot+16 : ChecksumedSize])
	h.Checksum = Checksum(b)
	le.PutUint32(b[OffChecksum:], h.Checksum)
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum computes the CRC-32C of the immutable header bytes
// [0, ChecksumedSize) with the checksum field itself taken as zero. b must
// hold at least ChecksumedSize bytes.
func Checksum(b []byte) uint32 {
	var zero [4]byte
	c := crc32.Update(0, castagnoli, b[:OffChecksum])
	c = crc32.Update(c, castagnoli, zero[:])
	return crc32.Update(c, castagnoli, b[OffChecksum+4:ChecksumedSize])
}

// HasMagic reports whether b starts with Magic: whether the bytes claim to
// be a shmkit file at all (of any version, valid or not), for tools that
// pick shmkit files out of a directory of others'.
func HasMagic(b []byte) bool {
	return len(b) >= len(Magic) && string(b[OffMagic:OffMagic+len(Magic)]) == Magic
}

// Decode parses and validates the common header at the start of b. It checks
// magic, version, flags, header size, checksum, kind and the kind's geometry,
// but not the file's actual size: see CheckFileSize, or DecodeFile for both.
func Decode(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, need %d", ErrTooShort, len(b), HeaderSize)
	}
	if !HasMagic(b) {
		return Header{}, fmt.Errorf("%w: % x", ErrBadMagic, b[:len(Magic)])
	}
	le := binary.LittleEndian
	h := Header{
		Major:       le.Uint16(b[OffMajor:]),
		Minor:       le.Uint16(b[OffMinor:]),
		Kind:        Kind(le.Uint16(b[OffKind:])),
		Flags:       le.Uint16(b[OffFlags:]),
		HeaderSize:  le.Uint32(b[OffHeaderSize:]),
		Checksum:    le.Uint32(b[OffChecksum:]),
		FileSize:    le.Uint64(b[OffFileSize:]),
		CreatedNano: int64(le.Uint64(b[OffCreated:])),
		Geometry: Geometry{
			Capacity: le.Uint64(b[OffCapacity:]),
			SlotSize: le.Uint32(b[OffSlotSize:]),
			Params:   [3]uint32{le.Uint32(b[OffParam0:]), le.Uint32(b[OffParam1:]), le.Uint32(b[OffParam2:])},
		},
		Creator: Creator{
			PID:        le.Uint32(b[OffCreatorPID:]),
			StartTicks: le.Uint64(b[OffCreatorStart:]),
		},
		Ready:      le.Uint32(b[OffReady:]),
		Generation: le.Uint64(b[OffGeneration:]),
	}
	copy(h.Creator.BootID[:], b[OffCreatorBoot:OffCreatorBoot+16])
	if h.Major == 0 {
		return h, fmt.Errorf("%w: major version 0", ErrInvalid)
	}
	if h.Major != MajorVersion {
		// Majors share no layout: format 1 judged liveness by pid alone,
		// so a build reading it would call format 2's holders (which
		// prove life by an entry lock) dead, and the reverse; format 2
		// readers would take a format 3 ring's message ids for payload.
		advice := "re-create the file with this build"
		if h.Major > MajorVersion {
			advice = "open it with a newer build"
		}
		return h, fmt.Errorf("%w: file is format %d.%d, this build reads only format %d (%s)", ErrVersionMismatch, h.Major, h.Minor, MajorVersion, advice)
	}
	if unknown := h.Flags & flagsIncompatMask &^ knownIncompat; unknown != 0 {
		return h, fmt.Errorf("%w: unknown incompatible flags %#04x", ErrVersionMismatch, unknown)
	}
	if sum := Checksum(b); sum != h.Checksum {
		return h, fmt.Errorf("%w: stored %#08x, computed %#08x", ErrChecksum, h.Checksum, sum)
	}
	if h.HeaderSize < HeaderSize || h.HeaderSize%CacheLine != 0 || uint64(h.HeaderSize) > MaxFileSize {
		return h, fmt.Errorf("%w: header size %d", ErrInvalid, h.HeaderSize)
	}
	want, err := h.expectedFileSize()
	if err != nil {
		return h, err
	}
	if h.FileSize != want {
		return h, fmt.Errorf("%w: header declares %d bytes, geometry needs %d", ErrGeometry, h.FileSize, want)
	}
	return h, nil
}

// CheckFileSize verifies that a file of n bytes is exactly the size the
// header declares. A shorter file would fault on access; a longer one means
// the header does not describe it.
func (h *Header) CheckFileSize(n int64) error {
	if n < 0 || uint64(n) != h.FileSize {
		return fmt.Errorf("%w: file is %d bytes, header declares %d", ErrGeometry, n, h.FileSize)
	}
	return nil
}

// Expect verifies the header names the given kind.
func (h *Header) Expect(k Kind) error {
	if h.Kind != k {
		return fmt.Errorf("%w: file is a %s, want a %s", ErrWrongKind, h.Kind, k)
	}
	return nil
}

// DecodeFile decodes the header of a whole file image b and checks that the
// geometry it declares fits b exactly.
func DecodeFile(b []byte) (Header, error) {
	h, err := Decode(b)
	if err != nil {
		return h, err
	}
	return h, h.CheckFileSize(int64(len(b)))
}

// expectedFileSize is header size plus the kind's body, overflow-checked.
func (h *Header) expectedFileSize() (uint64, error) {
	spec, err := SpecOf(h.Kind)
	if err != nil {
		return 0, err
	}
	body, err := spec.BodySize(h.Geometry)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrGeometry, h.Kind, err)
	}
	total, ok := addU64(uint64(h.HeaderSize), body)
	if !ok || total > MaxFileSize {
		return 0, fmt.Errorf("%w: %s needs more than %d bytes", ErrGeometry, h.Kind, uint64(MaxFileSize))
	}
	return total, nil
}

// addU64 and mulU64 report overflow instead of wrapping.
func addU64(a, b uint64) (uint64, bool) {
	s, carry := bits.Add64(a, b, 0)
	return s, carry == 0
}

func mulU64(a, b uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	return lo, hi == 0
}

// checkedSum adds sizes, failing on overflow or anything beyond MaxFileSize.
func checkedSum(parts ...uint64) (uint64, error) {
	var t uint64
	for _, p := range parts {
		var ok bool
		if t, ok = addU64(t, p); !ok || t > MaxFileSize {
			return 0, errors.New("size overflows")
		}
	}
	return t, nil
}

// checkedProduct multiplies a count by a record size, failing on overflow.
func checkedProduct(count, size uint64) (uint64, error) {
	p, ok := mulU64(count, size)
	if !ok || p > MaxFileSize {
		return 0, fmt.Errorf("%d records of %d bytes overflow", count, size)
	}
	return p, nil
}
