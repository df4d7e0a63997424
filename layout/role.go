package layout

import (
	"errors"
	"fmt"
)

// ErrRoleCorrupt marks a role word that names no participant entry.
var ErrRoleCorrupt = errors.New("layout: corrupt role word")

// Role words name the participant that holds a role: the repair lock of a
// ring, deque or hash map, a deque's owner word, and the holder half of a
// hash map's home lock word. Nobody holds the role when the word is 0.
//
//	bits  0-15  stamp: the holder's participant entry index + 1 (1..Participants)
//	bits 16-39  generation of that entry when the role was taken
//	bits 40-63  zero (a hash map's home lock keeps an acquisition count there;
//	            HashMapHomeHolderMask strips it)
//
// The generation makes a takeover exact: a word naming an entry that was
// freed and taken again since (its generation moved on) is not the new
// owner's. These constants are part of the format.
const (
	RoleStampBits = 16
	RoleGenBits   = 24
	RoleGenMask   = 1<<RoleGenBits - 1
	// RoleUsedBits is how many low bits a role word uses.
	RoleUsedBits = RoleStampBits + RoleGenBits
)

// Role is a decoded role word.
type Role struct {
	Stamp uint16 // participant index + 1; 0 for none
	Gen   uint32 // the entry's generation, 24 bits
}

// Pack encodes r.
func (r Role) Pack() uint64 { return uint64(r.Stamp) | uint64(r.Gen&RoleGenMask)<<RoleStampBits }

// UnpackRole decodes a role word. It does not validate: see Validate.
func UnpackRole(v uint64) Role {
	return Role{Stamp: uint16(v), Gen: uint32(v>>RoleStampBits) & RoleGenMask}
}

// Index is the participant entry the role names, or -1 for none.
func (r Role) Index() int { return int(r.Stamp) - 1 }

// ValidateRole checks a role word read from a file of participants
// entries: 0 (nobody), or a stamp naming an entry with no bits above
// RoleUsedBits.
func ValidateRole(v, participants uint64) error {
	if v == 0 {
		return nil
	}
	stamp := v & (1<<RoleStampBits - 1)
	switch {
	case v>>RoleUsedBits != 0:
		return fmt.Errorf("%w: %#016x has bits above bit %d", ErrRoleCorrupt, v, RoleUsedBits-1)
	case stamp == 0 || stamp > participants:
		return fmt.Errorf("%w: %#016x names no entry of a table of %d", ErrRoleCorrupt, v, participants)
	}
	return nil
}
