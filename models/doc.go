// Package models holds the Promela models of the ring's protocol
// (ring.pml) and the test that ties them to the code: every crash point
// the transport declares must be a step of a model or a row of
// docs/design.md's crash-window tables, and every step a model names must
// be a declared crash point. The models themselves are checked by
// models/check.sh (Spin), a step of scripts/test.sh; docs/design.md,
// "Models", says what they cover and abstract.
//
// It is not a library: it has no exported API and nothing imports it.
package models
