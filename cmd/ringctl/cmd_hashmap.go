package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/hashmap"
)

// The hash map verbs: get, put, del and list. They go through the kind's
// keyed entry (kind_hashmap.go); a ring or deque is refused as every verb
// refuses a kind it does not take. get and list map the file read-only
// (the library's Get and Range take no lock and write nothing); put and
// del attach as a participant, as any writer does.

// keyedMap is what the verbs need of a map.
type keyedMap interface {
	Get(key, buf []byte) (int, error)
	Put(key, value []byte) (bool, error)
	Delete(key []byte) error
	Range(fn func(key, value []byte) bool) error
	ValueSize() int
	Close() error
}

// openKeyed opens path's map for a verb: read-only unless write.
func openKeyed(c *cli.Context, path, verb string, write bool) (keyedMap, error) {
	k, err := kindOf(c, path)
	if err != nil {
		return nil, err
	}
	if k.keyed == nil {
		return nil, k.refuse(path, verb, "hash maps")
	}
	return k.keyed(c, path, write)
}

// openMap is the hash map's keyed entry.
func openMap(c *cli.Context, path string, write bool) (keyedMap, error) {
	if write {
		return openWith(c, path, hashmap.Open)
	}
	return openWith(c, path, hashmap.OpenReadOnly)
}

// bytesFlag reads the text flag name or its hex form name-hex (exactly
// one of them, required): a key or a value from the command line.
func bytesFlag(c *cli.Context, verb, name string) ([]byte, error) {
	h := name + "-hex"
	switch {
	case c.IsSet(name) && c.IsSet(h):
		return nil, cliutil.Usage("%s: --%s and --%s exclude each other", verb, name, h)
	case c.IsSet(name):
		return []byte(c.String(name)), nil
	case c.IsSet(h):
		b, err := hex.DecodeString(c.String(h))
		if err != nil {
			return nil, cliutil.Usage("%s: --%s %q: not hex digits", verb, h, c.String(h))
		}
		return b, nil
	}
	return nil, cliutil.Usage("%s: --%s or --%s is required", verb, name, h)
}

// entryJSON is one entry in the JSON of get and list: field names are a
// stable interface (docs/cli.md).
type entryJSON struct {
	KeyHex   string `json:"key_hex"`
	ValueHex string `json:"value_hex"`
	ValueLen int    `json:"value_len"`
}

func newEntry(key, value []byte) entryJSON {
	return entryJSON{KeyHex: hex.EncodeToString(key), ValueHex: hex.EncodeToString(value), ValueLen: len(value)}
}

// keyName is a key as a message names it.
func keyName(key []byte) string { return "key " + payloadText(key, false) }

func runGet(c *cli.Context, path string) error {
	key, err := bytesFlag(c, "get", "key")
	if err != nil {
		return err
	}
	m, err := openKeyed(c, path, "get", false)
	if err != nil {
		return err
	}
	defer m.Close()
	buf := make([]byte, m.ValueSize())
	n, err := m.Get(key, buf)
	switch {
	case errors.Is(err, transport.ErrNotFound):
		return cliutil.Problems(fmt.Sprintf("%s: %s not found", path, keyName(key)))
	case err != nil:
		return cliutil.FileError(path, err)
	}
	v := buf[:n]
	switch {
	case cliutil.JSON(c):
		return cliutil.WriteJSON(c.App.Writer, newEntry(key, v))
	case cliutil.Hex(c):
		_, err = fmt.Fprintln(c.App.Writer, hex.EncodeToString(v))
	default:
		_, err = c.App.Writer.Write(append(v, '\n'))
	}
	return err
}

// putJSON is put's JSON output.
type putJSON struct {
	KeyHex   string `json:"key_hex"`
	ValueLen int    `json:"value_len"`
	Inserted bool   `json:"inserted"` // false: an existing key's value replaced
}

func runPut(c *cli.Context, path string) error {
	key, err := bytesFlag(c, "put", "key")
	if err != nil {
		return err
	}
	value, err := bytesFlag(c, "put", "value")
	if err != nil {
		return err
	}
	m, err := openKeyed(c, path, "put", true)
	if err != nil {
		return err
	}
	defer m.Close()
	inserted, err := m.Put(key, value)
	if err != nil {
		return cliutil.FileError(path, err)
	}
	if err := m.Close(); err != nil {
		return cliutil.FileError(path, err)
	}
	if cliutil.JSON(c) {
		return cliutil.WriteJSON(c.App.Writer, putJSON{KeyHex: hex.EncodeToString(key), ValueLen: len(value), Inserted: inserted})
	}
	what := "updated"
	if inserted {
		what = "inserted"
	}
	// "(3 bytes)" after the key read as the key's size: say whose it is.
	_, err = fmt.Fprintf(c.App.Writer, "%s %s: a value of %s\n", what, keyName(key), plural(len(value), "byte", "bytes"))
	return err
}

func runDel(c *cli.Context, path string) error {
	key, err := bytesFlag(c, "del", "key")
	if err != nil {
		return err
	}
	m, err := openKeyed(c, path, "del", true)
	if err != nil {
		return err
	}
	defer m.Close()
	err = m.Delete(key)
	switch {
	case errors.Is(err, transport.ErrNotFound):
		return cliutil.Problems(fmt.Sprintf("%s: %s not found", path, keyName(key)))
	case err != nil:
		return cliutil.FileError(path, err)
	}
	if err := m.Close(); err != nil {
		return cliutil.FileError(path, err)
	}
	_, err = fmt.Fprintf(c.App.Writer, "deleted %s\n", keyName(key))
	return err
}

// listReport is list's JSON output.
type listReport struct {
	Path    string      `json:"path"`
	Entries []entryJSON `json:"entries"`
	hex     bool
}

func runList(c *cli.Context, path string) error {
	m, err := openKeyed(c, path, "list", false)
	if err != nil {
		return err
	}
	defer m.Close()
	rep := &listReport{Path: path, Entries: []entryJSON{}, hex: cliutil.Hex(c)}
	if err := guard(path, func() error {
		return m.Range(func(k, v []byte) bool {
			rep.Entries = append(rep.Entries, newEntry(k, v))
			return true
		})
	}); err != nil {
		return cliutil.FileError(path, err)
	}
	return output(c, rep)
}

func (rep *listReport) write(w io.Writer) error {
	if len(rep.Entries) == 0 {
		_, err := fmt.Fprintf(w, "%s: no entries\n", rep.Path)
		return err
	}
	fmt.Fprintf(w, "%s: %s, in bucket order\n", rep.Path, plural(len(rep.Entries), "entry", "entries"))
	rows := [][]string{}
	for _, e := range rep.Entries {
		k, _ := hex.DecodeString(e.KeyHex)
		v, _ := hex.DecodeString(e.ValueHex)
		rows = append(rows, []string{payloadText(k, rep.hex), strconv.Itoa(e.ValueLen), payloadText(v, rep.hex)})
	}
	return cliutil.DetailTable(w, []string{"key", "value bytes", "value"}, rows)
}

var (
	keyFlags = []cli.Flag{
		&cli.StringFlag{Name: "key", Usage: "the key, as text"},
		&cli.StringFlag{Name: "key-hex", Usage: "the key, in hex (for bytes that are not text)"},
	}
)

func getCommand() *cli.Command {
	return command("get", "print the value of a key of a hash map (read-only)", "PATH --key K|--key-hex HEX [--hex] [--format text|json | --json]", runGet,
		"Prints the value stored under the key as is, one line (--hex: in hex; --json: {\"key_hex\",\n"+
			"\"value_hex\",\"value_len\"}). A missing key is exit 1. The map is mapped read-only: the\n"+
			"library's Get takes no lock and never sees a torn value.",
		withFormat(append(append(append([]cli.Flag{}, keyFlags...), cliutil.EncodingFlags()...), cliutil.AllowModeFlag(), cliutil.OwnerFlag())...)...)
}

func putCommand() *cli.Command {
	return command("put", "store a value under a key of a hash map", "PATH --key K|--key-hex HEX --value V|--value-hex HEX [--format text|json | --json]", runPut,
		"Inserts the key or replaces its value (readers see the old value or the new, never a mix).\n"+
			"ringctl attaches as a participant for the write and detaches after it.",
		withFormat(append(append([]cli.Flag{}, keyFlags...),
			&cli.StringFlag{Name: "value", Usage: "the value, as text"},
			&cli.StringFlag{Name: "value-hex", Usage: "the value, in hex"},
			cliutil.AllowModeFlag())...)...)
}

func delCommand() *cli.Command {
	return command("del", "delete a key of a hash map", "PATH --key K|--key-hex HEX", runDel,
		"Deletes the key (its bucket becomes a tombstone). A missing key is exit 1.",
		append(append([]cli.Flag{}, keyFlags...), cliutil.AllowModeFlag())...)
}

func listCommand() *cli.Command {
	return command("list", "list the entries of a hash map (read-only)", "PATH [--hex] [--format text|json | --json]", runList,
		"Lists every entry in bucket order: keys and values quoted when they are text, else in hex\n"+
			"(--hex: always). The map is mapped read-only; entries changed during the list may show\n"+
			"old or new, and a key deleted and inserted again may show twice.",
		withFormat(append(cliutil.EncodingFlags(), cliutil.AllowModeFlag(), cliutil.OwnerFlag())...)...)
}
