package layout

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func regionImage(t testing.TB, body uint64) ([]byte, Header) {
	t.Helper()
	h, err := NewHeader(KindRegion, Geometry{Capacity: body}, 1700000000123456789,
		Creator{PID: 4242, StartTicks: 99, BootID: [16]byte{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, h.FileSize)
	if err := h.Encode(b); err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(b[OffReady:], ReadyValue)
	return b, h
}

func TestRoundTrip(t *testing.T) {
	b, h := regionImage(t, 4096)
	got, err := DecodeFile(b)
	if err != nil {
		t.Fatal(err)
	}
	h.Ready = ReadyValue
	if diff := cmp.Diff(h, got); diff != "" {
		t.Fatalf("decoded header differs (-want +got):\n%s", diff)
	}
	if !got.IsReady() || got.FileSize != HeaderSize+4096 {
		t.Fatalf("ready=%v size=%d", got.IsReady(), got.FileSize)
	}
}

func TestDecodeRejects(t *testing.T) {
	le := binary.LittleEndian
	tests := []struct {
		name   string
		mutate func(b []byte) []byte
		want   error
	}{
		{"short", func(b []byte) []byte { return b[:HeaderSize-1] }, ErrTooShort},
		{"magic", func(b []byte) []byte { b[1] = 'X'; return b }, ErrBadMagic},
		{"newer major", func(b []byte) []byte { le.PutUint16(b[OffMajor:], MajorVersion+1); return b }, ErrVersionMismatch},
		{"older major", func(b []byte) []byte { le.PutUint16(b[OffMajor:], MajorVersion-1); return b }, ErrVersionMismatch},
		{"format 1", func(b []byte) []byte { le.PutUint16(b[OffMajor:], 1); return resum(b) }, ErrVersionMismatch},
		{"format 2", func(b []byte) []byte { le.PutUint16(b[OffMajor:], 2); return resum(b) }, ErrVersionMismatch},
		{"format 4", func(b []byte) []byte { le.PutUint16(b[OffMajor:], 4); return resum(b) }, ErrVersionMismatch},
		{"major max", func(b []byte) []byte { le.PutUint16(b[OffMajor:], 0xffff); return resum(b) }, ErrVersionMismatch},
		{"major zero", func(b []byte) []byte { le.PutUint16(b[OffMajor:], 0); return resum(b) }, ErrInvalid},
		{"incompatible flag", func(b []byte) []byte { le.PutUint16(b[OffFlags:], 0x0100); return resum(b) }, ErrVersionMismatch},
		{"checksum", func(b []byte) []byte { b[OffCreated] ^= 1; return b }, ErrChecksum},
		{"header size small", func(b []byte) []byte { le.PutUint32(b[OffHeaderSize:], 128); return resum(b) }, ErrInvalid},
		{"header size unaligned", func(b []byte) []byte { le.PutUint32(b[OffHeaderSize:], 260); return resum(b) }, ErrInvalid},
		{"unknown kind", func(b []byte) []byte { le.PutUint16(b[OffKind:], 999); return resum(b) }, ErrUnknownKind},
		{"declared size", func(b []byte) []byte { le.PutUint64(b[OffFileSize:], 1<<20); return resum(b) }, ErrGeometry},
		{"capacity unaligned", func(b []byte) []byte { le.PutUint64(b[OffCapacity:], 100); return resum(b) }, ErrGeometry},
		{"capacity huge", func(b []byte) []byte { le.PutUint64(b[OffCapacity:], ^uint64(0)&^63); return resum(b) }, ErrGeometry},
		{"unused param", func(b []byte) []byte { le.PutUint32(b[OffParam1:], 7); return resum(b) }, ErrGeometry},
		{"file longer", func(b []byte) []byte { return append(b, make([]byte, 64)...) }, ErrGeometry},
		{"file shorter", func(b []byte) []byte { return b[:len(b)-64] }, ErrGeometry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := regionImage(t, 4096)
			_, err := DecodeFile(tt.mutate(b))
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

// resum recomputes the checksum so a test reaches the check after it.
func resum(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[OffChecksum:], Checksum(b))
	return b
}

// TestOtherMajorsRefused: format 3 is the only major this build reads. A
// file of format 1 or 2 (older) or 4 (newer), with any minor and a valid
// checksum, is refused with ErrVersionMismatch, and the message names the
// file's format and the one this build reads.
func TestOtherMajorsRefused(t *testing.T) {
	if MajorVersion != 3 || MinorVersion != 0 {
		t.Fatalf("format %d.%d, want 3.0", MajorVersion, MinorVersion)
	}
	for _, tc := range []struct {
		name         string
		major, minor uint16
		msg          []string
	}{
		{"format 1.0", 1, 0, []string{"format 1.0", "format 3", "re-create"}},
		{"format 2.0", 2, 0, []string{"format 2.0", "format 3", "re-create"}},
		{"format 2.3", 2, 3, []string{"format 2.3", "format 3", "re-create"}},
		{"format 4.0", 4, 0, []string{"format 4.0", "format 3", "newer build"}},
		{"format 4.2", 4, 2, []string{"format 4.2", "format 3", "newer build"}},
		{"format 65535.0", 0xffff, 0, []string{"format 65535.0", "format 3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := regionImage(t, 64)
			binary.LittleEndian.PutUint16(b[OffMajor:], tc.major)
			binary.LittleEndian.PutUint16(b[OffMinor:], tc.minor)
			resum(b)
			for name, decode := range map[string]func([]byte) (Header, error){"Decode": Decode, "DecodeFile": DecodeFile} {
				h, err := decode(b)
				if !errors.Is(err, ErrVersionMismatch) {
					t.Fatalf("%s: got %v, want ErrVersionMismatch", name, err)
				}
				for _, want := range tc.msg {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: %q does not mention %q", name, err, want)
					}
				}
				if h.Major != tc.major || h.Minor != tc.minor {
					t.Errorf("%s: refused header reports %d.%d, want %d.%d", name, h.Major, h.Minor, tc.major, tc.minor)
				}
			}
		})
	}
	// The same image as format 3 decodes: only the major was at fault.
	b, _ := regionImage(t, 64)
	if binary.LittleEndian.Uint16(b[OffMajor:]) != 3 {
		t.Fatalf("NewHeader wrote major %d, want 3", binary.LittleEndian.Uint16(b[OffMajor:]))
	}
	if _, err := DecodeFile(b); err != nil {
		t.Fatal(err)
	}
}

func TestOlderAndNewerMinorAccepted(t *testing.T) {
	for _, minor := range []uint16{0, 7} {
		b, _ := regionImage(t, 64)
		binary.LittleEndian.PutUint16(b[OffMinor:], minor)
		// a compatible flag a 2.0 reader does not know
		binary.LittleEndian.PutUint16(b[OffFlags:], 0x0001)
		if _, err := DecodeFile(resum(b)); err != nil {
			t.Fatalf("minor %d: %v", minor, err)
		}
	}
}

func TestExpectKind(t *testing.T) {
	_, h := regionImage(t, 64)
	if err := h.Expect(KindRegion); err != nil {
		t.Fatal(err)
	}
	if err := h.Expect(KindRing); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("got %v", err)
	}
}

func TestMapCoversHeaderExactly(t *testing.T) {
	_, h := regionImage(t, 128)
	m, err := h.Map()
	if err != nil {
		t.Fatal(err)
	}
	var next uint64
	for _, f := range m.Fields {
		if f.Offset != next {
			t.Fatalf("gap or overlap before %s at %d (expected %d)", f.Name, f.Offset, next)
		}
		next = f.Offset + f.Size
	}
	if next != h.FileSize {
		t.Fatalf("fields cover %d bytes, file is %d", next, h.FileSize)
	}
	name, _, start, ok := m.Locate(OffChecksum + 2)
	if !ok || name != "checksum" || start != OffChecksum {
		t.Fatalf("Locate(checksum+2) = %q %d %v", name, start, ok)
	}
	if name, _, _, ok := m.Locate(HeaderSize + 5); !ok || name != "region.body" {
		t.Fatalf("Locate(body) = %q %v", name, ok)
	}
	if _, _, _, ok := m.Locate(h.FileSize); ok {
		t.Fatal("Locate past the end found a field")
	}
}

func TestAreaLocate(t *testing.T) {
	m := Map{Areas: []Area{{Name: "slot", Offset: 1000, Stride: 64, Count: 4,
		Fields: []Field{{Name: "state", Offset: 0, Size: 8}, {Name: "payload", Offset: 8, Size: 56}}}}}
	for _, tc := range []struct {
		off  uint64
		name string
		ok   bool
	}{{1000, "slot[0].state", true}, {1064 + 9, "slot[1].payload", true}, {1000 + 4*64, "", false}, {999, "", false}} {
		name, _, _, ok := m.Locate(tc.off)
		if name != tc.name || ok != tc.ok {
			t.Errorf("Locate(%d) = %q,%v want %q,%v", tc.off, name, ok, tc.name, tc.ok)
		}
	}
}

// FuzzDecode feeds arbitrary bytes to the decoder. It must never panic, and
// a header it accepts must describe exactly the bytes it was given.
func FuzzDecode(f *testing.F) {
	b, _ := regionImage(f, 64)
	f.Add(b)
	f.Add(b[:HeaderSize])
	for _, opts := range []uint32{RingOptMessageIDs, 2} { // a ring with message ids; an unknown option bit (refused)
		g := RingGeometryWith(4, 64, 1, 1, opts)
		h, err := NewHeader(KindRing, RingGeometryWith(4, 64, 1, 1, 0), 1, Creator{})
		if err != nil {
			f.Fatal(err)
		}
		h.Geometry = g
		o := make([]byte, h.FileSize)
		if err := h.Encode(o); err != nil {
			f.Fatal(err)
		}
		f.Add(o)
	}
	for _, major := range []uint16{1, 2, 4} { // other formats: always refused
		o := append([]byte(nil), b...)
		binary.LittleEndian.PutUint16(o[OffMajor:], major)
		f.Add(resum(o))
	}
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeFile(data)
		if err != nil {
			return
		}
		if h.FileSize != uint64(len(data)) || h.FileSize < uint64(h.HeaderSize) || h.Major != MajorVersion {
			t.Fatalf("accepted inconsistent header %+v for %d bytes", h, len(data))
		}
		spec, err := SpecOf(h.Kind)
		if err != nil {
			t.Fatalf("accepted unknown kind %v", h.Kind)
		}
		body, err := spec.BodySize(h.Geometry)
		if err != nil || uint64(h.HeaderSize)+body != uint64(len(data)) {
			t.Fatalf("accepted geometry that does not fit: body %d err %v len %d", body, err, len(data))
		}
		m, err := h.Map()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range m.Areas {
			if a.Offset+a.Stride*a.Count > uint64(len(data)) {
				t.Fatalf("area %s runs past the file", a.Name)
			}
		}
		for _, fl := range m.Fields {
			if fl.Offset+fl.Size > uint64(len(data)) {
				t.Fatalf("field %s runs past the file", fl.Name)
			}
		}
	})
}
