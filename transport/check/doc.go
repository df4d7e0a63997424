// Package check is the vocabulary in which every shmkit file kind with a
// participant table judges itself: the ring and the deque (package
// transport) and the hash map (package transport/hashmap).
//
// A kind's Check reads a file and lists every problem it finds as a
// Finding (where: the field as package layout's field tables name it and
// its file offset; what: a Problem; whose: the participant entry and its
// verdict; and the Action a repair would take now) in a Report.
// PlanRepair is Report.Plan: the findings a repair acts on. Repair runs
// the same classification under the file's repair lock and reports what
// it did, one Finding per action taken, in a RepairReport. Peer is what a
// file knows of one participant entry. Problem and Action names are
// stable: tools print them and emit them in JSON (docs/cli.md lists
// them).
//
// What check is not: it reads no file and judges nothing itself (each
// kind's Check does, with the participant table's verdicts), and it
// repairs nothing. Tools render its values and decide nothing themselves.
package check
