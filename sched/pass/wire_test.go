package pass

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/sched/heartbeat"
)

// The wire format, version 2 (wire.go, docs/format.md): what is encoded
// decodes to the same pass or result, the limits of a 56-byte payload (the
// default 64-byte slot) hold, and what came through shared memory is
// checked: another version, a truncated header and lengths that lie are
// refused, never read past.

func TestSubmitWireRoundTrip(t *testing.T) {
	buf := make([]byte, 56)
	for _, m := range []submitMsg{
		{closure: 0xdeadbeef, token: 1<<40 + 3, reply: heartbeat.Ticket{Slot: 3, Gen: 7}},
		{closure: 1, token: 1, reply: heartbeat.Ticket{Slot: 0, Gen: 0}, args: []byte{1}},
		{closure: 0, token: 1<<64 - 1, reply: heartbeat.Ticket{Slot: 0xffff, Gen: 0xffffff}, args: bytes.Repeat([]byte{7}, 34)},
	} {
		n, err := encodeSubmit(buf, m)
		if err != nil {
			t.Fatalf("%d args: %v", len(m.args), err)
		}
		if n != submitHeader+len(m.args) || buf[0] != WireVersion || binary.LittleEndian.Uint16(buf[12:]) != submitMarker {
			t.Fatalf("%d args: %d bytes, header %x", len(m.args), n, buf[:14])
		}
		got, err := decodeSubmit(buf[:n])
		if err != nil || got.closure != m.closure || got.token != m.token || got.reply != m.reply || !bytes.Equal(got.args, m.args) {
			t.Fatalf("%d args: decoded %+v (%v), want %+v", len(m.args), got, err, m)
		}
	}
}

// A 56-byte payload carries 34 argument bytes and 44 result bytes; a pass
// with more arguments is refused before anything is written.
func TestSubmitWireArgsLimit(t *testing.T) {
	if MaxArgs(56) != 34 || MaxResult(56) != 44 {
		t.Fatalf("MaxArgs(56) = %d, MaxResult(56) = %d; want 34 and 44", MaxArgs(56), MaxResult(56))
	}
	if MaxArgs(submitHeader) != 0 || MaxArgs(3) != 0 || MaxResult(resultHeader) != 0 || MaxArgs(1<<20) != v1Ambiguous-1-submitHeader || MaxResult(1<<20) != 0xffff {
		t.Fatal("limits outside a payload's range")
	}
	buf := make([]byte, 56)
	if _, err := encodeSubmit(buf, submitMsg{closure: 1, token: 1, args: make([]byte, 34)}); err != nil {
		t.Fatalf("34 bytes: %v", err)
	}
	clean := make([]byte, 56)
	_, err := encodeSubmit(clean, submitMsg{closure: 1, token: 1, args: make([]byte, 35)})
	if !errors.Is(err, ErrArgsTooLarge) || !strings.Contains(err.Error(), "limit is 34") {
		t.Fatalf("35 bytes: %v, want ErrArgsTooLarge naming the limit", err)
	}
	if !bytes.Equal(clean, make([]byte, 56)) {
		t.Fatalf("a refused pass wrote %x", clean)
	}
	// The reply slot has 16 bits on the wire, the generation 24.
	if _, err := encodeSubmit(buf, submitMsg{closure: 1, token: 1, reply: heartbeat.Ticket{Slot: 0x10000}}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("reply slot 0x10000: %v", err)
	}
	if _, err := encodeSubmit(buf, submitMsg{closure: 1, token: 1, reply: heartbeat.Ticket{Gen: 1 << 24}}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("reply generation 1<<24: %v", err)
	}
}

func TestResultWireRoundTripAndTruncation(t *testing.T) {
	buf := make([]byte, 56)
	// An error message longer than the slot is cut to fit, and flagged.
	n := encodeResult(buf, 9, StatusError, bytes.Repeat([]byte("x"), 100))
	r, err := decodeResult(buf[:n])
	if err != nil || r.token != 9 || r.status != StatusError|StatusTruncated || len(r.data) != 44 || n != 56 {
		t.Fatalf("%+v %v", r, err)
	}
	if e := r.err(); !errors.Is(e, ErrFailed) || !strings.HasSuffix(e.Error(), strings.Repeat("x", 44)+"…") || !strings.Contains(e.Error(), "token 9") {
		t.Fatalf("a truncated error: %v", e)
	}
	// A result of exactly the limit is whole.
	n = encodeResult(buf, 10, StatusOK, bytes.Repeat([]byte("y"), 44))
	if r, err := decodeResult(buf[:n]); err != nil || r.status != StatusOK || r.err() != nil || string(r.data) != strings.Repeat("y", 44) {
		t.Fatalf("%+v %v", r, err)
	}
	n = encodeResult(buf, 11, StatusOK, []byte("fine"))
	if r, _ := decodeResult(buf[:n]); r.token != 11 || r.err() != nil || string(r.data) != "fine" {
		t.Fatalf("%+v", r)
	}
	// Every failure status is an ErrFailed, and says which failure.
	for _, tc := range []struct {
		status Status
		cause  error
		name   string
	}{
		{StatusError, nil, "error"},
		{StatusUnknownClosure, ErrUnknownClosure, "unknown closure"},
		{StatusMalformed, ErrMalformed, "malformed"},
		{StatusResultTooLarge, ErrResultTooLarge, "result too large"},
		{StatusCancelled, ErrCancelled, "cancelled"},
	} {
		n := encodeResult(buf, 12, tc.status, []byte("why"))
		r, err := decodeResult(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		e := r.err()
		if !errors.Is(e, ErrFailed) || (tc.cause != nil && !errors.Is(e, tc.cause)) || !strings.HasSuffix(e.Error(), ": why") {
			t.Fatalf("status %v: %v", tc.status, e)
		}
		if tc.status.String() != tc.name || (tc.status|StatusTruncated).String() != tc.name+" (message truncated)" {
			t.Fatalf("status %d named %q", tc.status, tc.status.String())
		}
	}
	if Status(0x7f).String() != "status(127)" {
		t.Fatalf("an unknown status is named %q", Status(0x7f).String())
	}
}

// Messages of another wire version are refused as such (ErrWireVersion,
// which is also ErrMalformed): a version-1 pass (closure id u32 | token
// u64 | arg len u16 | args, no version byte, no reply address) and a
// result of version 1 or 3. A worker acks such a pass unrun: it has no
// reply address to answer.
func TestWireRefusesOtherVersions(t *testing.T) {
	v1 := func(closure uint32, token uint64, args []byte) []byte {
		m := binary.LittleEndian.AppendUint32(nil, closure)
		m = binary.LittleEndian.AppendUint64(m, token)
		m = binary.LittleEndian.AppendUint16(m, uint16(len(args)))
		return append(m, args...)
	}
	for _, msg := range [][]byte{
		v1(1, 2, []byte("a version-1 pass")),
		v1(closureEcho, 1, make([]byte, 8)),
		v1(0x0103, 5, bytes.Repeat([]byte{9}, 30)),
		// Closure ids whose low byte reads as version 2, with and
		// without a zero second byte, and a length past the v2 header.
		v1(2, 8<<32, make([]byte, 8)),
		v1(0x0202, 1, make([]byte, 20)),
		// The one version-1 length at which bytes 12-13 hold the marker.
		v1(2, 1, make([]byte, 0xffff)),
	} {
		if _, err := decodeSubmit(msg); !errors.Is(err, ErrWireVersion) || !errors.Is(err, ErrMalformed) {
			t.Fatalf("version-1 pass %x: %v, want ErrWireVersion", msg, err)
		}
	}
	buf := make([]byte, 56)
	n, _ := encodeSubmit(buf, submitMsg{closure: 1, token: 2, args: []byte("v3")})
	for _, version := range []byte{0, 1, 3, 0xff} {
		msg := append([]byte(nil), buf[:n]...)
		msg[0] = version
		if _, err := decodeSubmit(msg); !errors.Is(err, ErrWireVersion) || !strings.Contains(err.Error(), "speaks version 2") {
			t.Fatalf("a pass of version %d: %v", version, err)
		}
		res := make([]byte, 56)
		rn := encodeResult(res, 3, StatusOK, []byte("ok"))
		res[0] = version
		if _, err := decodeResult(res[:rn]); !errors.Is(err, ErrWireVersion) || !errors.Is(err, ErrMalformed) {
			t.Fatalf("a result of version %d: %v", version, err)
		}
	}
}

// Lengths that lie and headers cut short are refused (ErrMalformed, not
// ErrWireVersion: the version is right), never read past. A pass whose
// header is whole still yields its token and reply address, so that its
// worker can tell its submitter it was malformed.
func TestWireRefusesLies(t *testing.T) {
	buf := make([]byte, 56)
	reply := heartbeat.Ticket{Slot: 4, Gen: 9}
	n, _ := encodeSubmit(buf, submitMsg{closure: 2, token: 77, reply: reply, args: []byte("ab")})
	msg := append([]byte(nil), buf[:n]...)

	lie := append([]byte(nil), msg...)
	binary.LittleEndian.PutUint16(lie[10:], 200) // 200 argument bytes, in a message holding 2
	m, err := decodeSubmit(lie)
	if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrWireVersion) {
		t.Fatalf("an argument length past the message: %v", err)
	}
	if m.token != 77 || m.reply != reply || m.args != nil {
		t.Fatalf("a malformed pass with a whole header: %+v, want its token and reply address and no args", m)
	}
	binary.LittleEndian.PutUint16(lie[10:], 3) // one byte too many
	if _, err := decodeSubmit(lie); !errors.Is(err, ErrMalformed) {
		t.Fatalf("an argument length one past the message: %v", err)
	}

	marker := append([]byte(nil), msg...)
	marker[12] = 0xfe
	if _, err := decodeSubmit(marker); !errors.Is(err, ErrWireVersion) {
		t.Fatalf("a marker changed: %v", err)
	}
	for _, cut := range []int{0, 1, submitHeader - 1} {
		if _, err := decodeSubmit(msg[:cut]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("a header cut to %d bytes: %v", cut, err)
		}
	}

	rn := encodeResult(buf, 78, StatusOK, []byte("x"))
	res := append([]byte(nil), buf[:rn]...)
	binary.LittleEndian.PutUint16(res[2:], 50) // 50 data bytes, in a message holding 1
	if r, err := decodeResult(res); !errors.Is(err, ErrMalformed) || errors.Is(err, ErrWireVersion) || r.token != 78 || r.data != nil {
		t.Fatalf("a result length past the message: %+v %v", r, err)
	}
	for _, cut := range []int{0, 1, resultHeader - 1} {
		if _, err := decodeResult(res[:cut]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("a result header cut to %d bytes: %v", cut, err)
		}
	}
}

// FuzzPassWire: decoders take bytes from shared memory; they must never
// panic (nor read past the message), and what they accept re-encodes to
// the same bytes.
func FuzzPassWire(f *testing.F) {
	buf := make([]byte, 56)
	n, _ := encodeSubmit(buf, submitMsg{closure: 3, token: 4, reply: heartbeat.Ticket{Slot: 5, Gen: 6}, args: []byte("args")})
	f.Add(append([]byte(nil), buf[:n]...))
	n = encodeResult(buf, 5, StatusOK, []byte("data"))
	f.Add(append([]byte(nil), buf[:n]...))
	n = encodeResult(buf, 6, StatusError, bytes.Repeat([]byte("e"), 100))
	f.Add(append([]byte(nil), buf[:n]...))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 200, 0, 1, 2}) // version 1, lying about its length
	f.Fuzz(func(t *testing.T, msg []byte) {
		orig := append([]byte(nil), msg...)
		if m, err := decodeSubmit(msg); err == nil {
			out := make([]byte, submitHeader+len(m.args))
			k, err := encodeSubmit(out, m)
			if err != nil || k != len(out) || !bytes.Equal(out[:k], msg[:k]) {
				t.Fatalf("submit re-encode of %x: %x (%v)", msg, out[:k], err)
			}
		}
		if r, err := decodeResult(msg); err == nil {
			out := make([]byte, resultHeader+len(r.data))
			k := encodeResult(out, r.token, r.status, r.data)
			if k != len(out) || !bytes.Equal(out[:k], msg[:k]) {
				t.Fatalf("result re-encode of %x: %x", msg, out[:k])
			}
			_ = r.err()
			_ = r.status.String()
		}
		if !bytes.Equal(msg, orig) {
			t.Fatalf("a decoder wrote to its input: %x, was %x", msg, orig)
		}
	})
}

// docs/format.md carries the wire layout this file encodes: the layout
// lines of wire.go's package comment, word for word.
func TestFormatDocCarriesTheWireLayout(t *testing.T) {
	doc, err := os.ReadFile("../../docs/format.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"submit:  0 version (u8) = 2 | 1 reply generation (u24) | 4 closure id (u32)",
		"8 reply slot (u16) | 10 arg len (u16) | 12 marker (u16) = 0xffff",
		"14 token (u64) | 22 args",
		"result:  0 version (u8) = 2 | 1 status (u8) | 2 data len (u16) | 4 token (u64) | 12 data",
	} {
		if !strings.Contains(string(doc), line) {
			t.Errorf("docs/format.md lacks the layout line %q", line)
		}
	}
	// And the offsets there are the encoder's.
	buf := make([]byte, 64)
	n, err := encodeSubmit(buf, submitMsg{closure: 0x11223344, token: 0x0102030405060708, reply: heartbeat.Ticket{Slot: 5, Gen: 9}, args: []byte("ab")})
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if buf[0] != 2 || le.Uint32(buf[0:])>>8 != 9 || le.Uint32(buf[4:]) != 0x11223344 || le.Uint16(buf[8:]) != 5 ||
		le.Uint16(buf[10:]) != 2 || le.Uint16(buf[12:]) != 0xffff || le.Uint64(buf[14:]) != 0x0102030405060708 || n != 24 {
		t.Fatalf("encoded %x", buf[:n])
	}
}
