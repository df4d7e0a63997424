package pass

import (
	"bytes"
	"errors"
	"testing"
)

func TestSubmitWireRoundTrip(t *testing.T) {
	buf := make([]byte, 56)
	for _, args := range [][]byte{nil, {1}, bytes.Repeat([]byte{7}, 42)} {
		n, err := encodeSubmit(buf, 0xdeadbeef, 1<<40+3, args)
		if err != nil {
			t.Fatal(err)
		}
		c, tok, got, err := decodeSubmit(buf[:n])
		if err != nil || c != 0xdeadbeef || tok != 1<<40+3 || !bytes.Equal(got, args) {
			t.Fatalf("%d args: %x %d %x %v", len(args), c, tok, got, err)
		}
	}
	if _, err := encodeSubmit(buf, 1, 1, make([]byte, 43)); !errors.Is(err, ErrArgsTooLarge) {
		t.Fatal(err)
	}
}

func TestResultWireTruncation(t *testing.T) {
	buf := make([]byte, 56)
	n := encodeResult(buf, 9, StatusError, bytes.Repeat([]byte("x"), 100))
	r, err := decodeResult(buf[:n])
	if err != nil || r.Token != 9 || r.Status != StatusError|StatusTruncated || len(r.Data) != 45 {
		t.Fatalf("%+v %v", r, err)
	}
	if !errors.Is(r.Err(), ErrFailed) {
		t.Fatal(r.Err())
	}
	n = encodeResult(buf, 10, StatusOK, []byte("fine"))
	if r, _ := decodeResult(buf[:n]); r.Err() != nil || string(r.Data) != "fine" {
		t.Fatalf("%+v", r)
	}
}

func TestWireRejectsLies(t *testing.T) {
	// An argument length longer than the message, and a truncated header.
	msg := []byte{1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 200, 0, 1, 2}
	if _, _, _, err := decodeSubmit(msg); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
	if _, _, _, err := decodeSubmit(msg[:5]); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
	res := []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 50, 0, 'x'}
	if _, err := decodeResult(res); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
}

// FuzzPassWire: decoders take bytes from shared memory; they must never
// panic, and what they accept re-encodes to the same bytes.
func FuzzPassWire(f *testing.F) {
	buf := make([]byte, 56)
	n, _ := encodeSubmit(buf, 3, 4, []byte("args"))
	f.Add(append([]byte(nil), buf[:n]...))
	n = encodeResult(buf, 5, StatusOK, []byte("data"))
	f.Add(append([]byte(nil), buf[:n]...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, msg []byte) {
		if c, tok, args, err := decodeSubmit(msg); err == nil {
			out := make([]byte, submitHeader+len(args))
			m, err := encodeSubmit(out, c, tok, args)
			if err != nil || !bytes.Equal(out[:m], msg[:m]) {
				t.Fatalf("submit re-encode differs: %v", err)
			}
		}
		if r, err := decodeResult(msg); err == nil {
			out := make([]byte, resultHeader+len(r.Data))
			m := encodeResult(out, r.Token, r.Status, r.Data)
			if !bytes.Equal(out[:m], msg[:m]) {
				t.Fatal("result re-encode differs")
			}
			_ = r.Err()
			_ = r.Status.String()
		}
	})
}
