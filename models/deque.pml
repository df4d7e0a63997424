/*
 * deque.pml: the deque's protocol (transport/deque.go, deque_ops.go,
 * deque_repair.go, deque_wait.go, slots.go, lease.go, internal/peers) as
 * the code implements it, with a process death possible after every step
 * that writes shared memory (macro D; a death right after a pure load
 * leaves memory as a death before it, so D follows writes). See
 * docs/design.md, "Models (Spin)", for coverage and abstractions.
 *
 * "crash: NAME" comments mark the model step a crash point of the code
 * corresponds to (the D there is where a death at that point lands).
 *
 * Known-bad variants (models/check.sh requires a counterexample of each):
 *   BAD_ADOPT_NOPROOF   Adopt takes the owner role without asking whether
 *                       the owner is alive: two live owners move bottom.
 *   BAD_STEAL_NOCAS     a steal takes the message at top with a store of
 *                       the word it loaded, not the CAS the owner's pop of
 *                       the last message races: both take it.
 *   BAD_STALE_JUDGE     a steal helps top past a READING slot judged
 *                       consumed against an owner word loaded after the
 *                       slot word, without re-reading the slot (the code
 *                       before the model found it): a dead owner's pop
 *                       rolled back in between is stepped past, lost
 *                       (needs -DWITH_ADOPTER).
 *   BAD_RELEASE_FORWARD fixBottom releases a dead owner's push-batch claims
 *                       first to last (the code before the model found
 *                       it): a repair killed after the first leaves the
 *                       rest WRITING behind a free bottom, which no repair
 *                       finds (needs -DDQBATCH -DMAXD=2).
 *
 * Configuration: -DDQBATCH (the owner's TryPushBatch of 2 and TryPopBatch
 * of 2, the thief's TryStealBatch of 2), -DCLAIM, -DWITH_ADOPTER, -DC=,
 * -DMAXD=, -DNPUSH=, -DNPOP=.
 */

#ifndef C
#define C 2
#endif
#ifndef MAXD
#define MAXD 1
#endif
#ifndef LIMIT
#define LIMIT 3
#endif
#ifndef NPUSH
#define NPUSH 2        /* the owner's pushes: messages 1..NPUSH */
#endif
#ifndef NPOP
#define NPOP 2         /* the owner's pops after its pushes: the second races the thief for the last message */
#endif
#ifdef POPS
#error "deque.pml counts the owner's pops with NPOP (POPS is ring.pml's)"
#endif
#define MADOPT (NPUSH+1) /* the adopter's message */
#define NMSG (NPUSH+1)

#define OWNER 0        /* entry 0: created the deque, owner role; pushes, pops, Close */
#define THIEF 1        /* entry 1: TrySteal (or TryClaim then Ack or Release with -DCLAIM); heals when blocked */
#define ADOPTER 2      /* entry 2 (-DWITH_ADOPTER): Adopt, then as owner a push and a pop, Close */
#define DRAINER 3      /* entry 3: after all others: Repair, Adopt, drain; never dies */
#define NPROC 4
#define NWORK 3
#define NE 4

#define FREE 0
#define WRITING 1
#define READY 2
#define READING 3
#define LEASED 4
#define POISONED 5
#define RETURNED 6

#define EFREE 0
#define ECLAIMING 1
#define EACTIVE 2
#define EDEAD 3

/* ---- shared memory ---- */
byte st[C]; byte ow[C]; byte lp[C]; byte dv[C];   /* slot word: state, owner stamp, lap, deliveries */
byte d1[C]; byte d2[C];                           /* payload: a message id in two halves */
byte top, bottom, pending;
byte ownS, ownG;                                  /* the owner word: stamp and generation */
byte lockE, lockG;                                /* the repair lock word */
byte est[NE]; byte egen[NE]; byte elock[NE];      /* entries; entry locks (holder id + 1) */

/* ---- ghosts ---- */
bool alive[NPROC];
byte ndeaths;
byte gent[NE];          /* live holder of entry e: id + 1 */
byte gown[C];           /* who took slot i: id + 1 */
bool gowner[NPROC];     /* may move bottom (holds the owner role) */
byte ndeliv[NMSG+1];
bool mayRedeliver[NMSG+1];
bool pushedRet[NMSG+1];
bool poisonTaken[NMSG+1];
byte nfin;
bool finished;

#define LIVEENT(e) (gent[e] != 0 && alive[gent[e]-1])
/* the death is counted in the step that decides it, so MAXD bounds the
 * deaths of a run exactly (two processes cannot both pass the guard) */
#define D if :: atomic { (mortal && ndeaths < MAXD) -> ndeaths++ }; goto died :: skip fi

#define LOCALS \
	bool mortal = true; byte mystamp; byte myent; byte mygen; \
	byte t, b, p, lap, i, j, ws, wo, wl, wd, res, k, x1, x2, got, stale, os, vs, vg, taker, s, g, le, lg, e, t2; \
	int dd; bool ok, busy, dead, halive, cons, adopted; \
	byte rws, rwo, rwl, rwd; bool rdead[NE]; \
	byte kk, nw, lo, low, nt, nb, nn, ns; bool stolen; byte tpos[2]; byte pay[2]; byte spos[2]

#define DIE \
died: skip; \
	d_step { \
		alive[me] = false; nfin++; gowner[me] = false; \
		k = 0; \
		do \
		:: k < C -> \
			if \
			:: ow[k] != 0 && gent[ow[k]-1] == me+1 && (st[k] == READING || st[k] == LEASED) -> mayRedeliver[d1[k]] = true \
			:: else -> skip \
			fi; k++ \
		:: else -> break \
		od; \
		k = 0; \
		do \
		:: k < NE -> if :: elock[k] == me+1 -> elock[k] = 0 :: else -> skip fi; k++ \
		:: else -> break \
		od; k = 0 \
	}

#define RESET atomic { t = 0; b = 0; p = 0; lap = 0; i = 0; j = 0; ws = 0; wo = 0; wl = 0; wd = 0; res = 0; x1 = 0; x2 = 0; got = 0; \
	stale = 0; os = 0; vs = 0; vg = 0; taker = 0; s = 0; g = 0; le = 0; lg = 0; t2 = 0; dd = 0; ok = 0; busy = 0; dead = 0; \
	halive = 0; cons = 0; rws = 0; rwo = 0; rwl = 0; rwd = 0; \
	kk = 0; nw = 0; lo = 0; low = 0; nt = 0; nb = 0; nn = 0; ns = 0; stolen = 0; \
	tpos[0] = 0; tpos[1] = 0; pay[0] = 0; pay[1] = 0; spos[0] = 0; spos[1] = 0; \
	e = 0; do :: e < NE -> rdead[e] = 0; e++ :: else -> break od; e = 0 }

#define LOAD(q, a, bb, c, f) atomic { a = st[q]; bb = ow[q]; c = lp[q]; f = dv[q] }
#define SCAS(q, os_, oo, ol, od, ns, no, nl, nd, r) \
	atomic { \
		if \
		:: (st[q] == os_ && ow[q] == oo && lp[q] == ol && dv[q] == od) -> \
			st[q] = ns; ow[q] = no; lp[q] = nl; dv[q] = nd; r = true \
		:: else -> r = false \
		fi \
	}
#define CASB(v, o, n) atomic { if :: v == o -> v = n :: else -> skip fi }
#define UNCOUNT atomic { if :: pending > 0 -> pending-- :: else -> skip fi }
/* a take's CAS: the slot had no live taker */
#define TOOK(q) assert(gown[q] == 0 || !alive[gown[q]-1]); gown[q] = me+1
/* a store that the code makes without a CAS: the word is still ours */
#define MINE(q, s0, l0) assert(st[q] == s0 && ow[q] == mystamp && lp[q] == l0)
/* bottom is stored only by its one live mover */
#define OTHER(q) (q == me || !alive[q] || !gowner[q])
#define SOLE assert(OTHER(0) && OTHER(1) && OTHER(2) && OTHER(3))
#define BSTORE(v) atomic { SOLE; bottom = v }
#define NOTLIVE(o) assert(o == mystamp || !LIVEENT(o-1))
#define DELIVER(x) atomic { assert(ndeliv[x] == 0 || mayRedeliver[x]); ndeliv[x]++ }

/* ---- the table (peers) ---- */
inline judge(q, sq, dead) {
	if
	:: q == myent -> dead = false
	:: sq == EDEAD -> dead = true
	:: sq == ECLAIMING || sq == EACTIVE -> dead = (elock[q] == 0)
	:: else -> dead = false
	fi
}

/* HolderAlive(vs, vg) */
inline holderAlive() {
	atomic { s = est[vs-1]; g = egen[vs-1] };
	judge(vs-1, s, dead);
	halive = ((s == EACTIVE || s == ECLAIMING) && g == vg && !dead)
}

inline lockRepair() {
	do
	:: atomic { le = lockE; lg = lockG };
		if
		:: le == 0 ->
			atomic { if :: lockE == 0 -> lockE = mystamp; lockG = mygen; got = true :: else -> got = false fi };
			D;
			if :: got -> break :: else -> skip fi
		:: le == mystamp && lg == mygen -> got = false; break
		:: else ->
			vs = le; vg = lg; holderAlive();
			if
			:: halive -> got = false; break
			:: else ->
				atomic { if :: lockE == le && lockG == lg -> lockE = mystamp; lockG = mygen; got = true :: else -> got = false fi };
				D;
				if :: got -> break :: else -> skip fi
			fi
		fi
	od
}

inline unlockRepair() {
	atomic { if :: lockE == mystamp && lockG == mygen -> lockE = 0; lockG = 0 :: else -> skip fi }; D
}

/* ---- the deque ---- */

/* consumedAtTopFor: the owner word is loaded where its value counts */
inline consumed() {
	if
	:: dd == 1 -> cons = (ws == FREE || ws == WRITING || ws == READY)
	:: dd == 0 && (ws == LEASED || ws == POISONED || ws == RETURNED) -> cons = true
	:: dd == 0 && ws == READING -> os = ownS; cons = (wo != os)
	:: else -> cons = false
	fi
}

/* giveBack(j) of the word (rws, rwo, rwl, rwd): ok */
inline giveBack() {
	taker = rwo;
	atomic { pending++ }; D;
	do
	:: atomic {
			SCAS(j, rws, rwo, rwl, rwd, RETURNED, 0, rwl, rwd, ok);
			if :: ok -> NOTLIVE(taker); gown[j] = 0 :: else -> skip fi
		};
		if
		:: ok -> D; break /* crash: deque.return.after-mark */
		:: else ->
			LOAD(j, rws, rwo, rwl, rwd);
			if
			:: rwo != taker || (rws != READING && rws != LEASED) -> UNCOUNT; D; break
			:: else -> skip
			fi
		fi
	od
}

/* takeReturned(ns): res 0 taken (slot i, lap lap, deliveries wd), 1 none */
inline takeReturned(ns) {
	j = 0; res = 1;
	do
	:: j < C ->
		LOAD(j, ws, wo, wl, wd);
		if
		:: ws == RETURNED && wd >= LIMIT ->
			SCAS(j, ws, wo, wl, wd, POISONED, wo, wl, wd, ok); D;
			if :: ok -> UNCOUNT; D :: else -> skip fi
		:: ws == RETURNED && wd < LIMIT ->
			atomic { SCAS(j, ws, wo, wl, wd, ns, mystamp, wl, wd+1, ok); if :: ok -> TOOK(j) :: else -> skip fi };
			D;
			if :: ok -> UNCOUNT; D; i = j; lap = wl; wd++; res = 0; break :: else -> skip fi
		:: else -> skip
		fi;
		j++
	:: else -> break
	od;
	j = 0
}

/* steal(ns): res 0 taken (slot i, lap lap), 1 empty */
inline steal(ns) {
	stale = 0;
	do
	:: t = top;
		atomic { lap = t / C; i = t % C };
		LOAD(i, ws, wo, wl, wd);
		dd = wl - lap;
		res = 3;
		if
		:: dd == 0 && ws == READY -> skip
		:: else ->
			b = bottom;
			if
			:: t >= b ->
				if
				:: pending != 0 -> takeReturned(ns)
				:: else -> res = 1
				fi
			:: b - t > C -> assert(top != t); res = 2
			:: else -> LOAD(i, ws, wo, wl, wd); dd = wl - lap
			fi
		fi;
		if
		:: res == 3 ->
			res = 2;
			if
			:: dd == 0 && ws == READY && wd >= LIMIT ->
				SCAS(i, ws, wo, wl, wd, POISONED, 0, wl, wd, ok); D;
				if :: ok -> CASB(top, t, t+1); D :: else -> skip fi
			:: dd == 0 && ws == READY && wd < LIMIT ->
#ifndef BAD_STEAL_NOCAS
				atomic { SCAS(i, ws, wo, wl, wd, ns, mystamp, lap, wd+1, ok); if :: ok -> TOOK(i) :: else -> skip fi };
#else
				/* the slot taken by a store of the word seen, no CAS: the
				 * owner's pop of the last message may take it in between */
				atomic { st[i] = ns; ow[i] = mystamp; lp[i] = lap; dv[i] = wd+1; ok = true; TOOK(i) };
#endif
				if
				:: ok ->
					D; /* crash: deque.steal.after-take */
					CASB(top, t, t+1);
					D; /* crash: deque.steal.after-advance */
					wd++; res = 0
				:: else -> skip
				fi
			:: else ->
				consumed();
				if
				:: cons && ws == READING ->
					/* judged against the owner word loaded now: only if
					 * the slot still holds the word seen (a dead owner's
					 * pop rolled back under a stale word otherwise;
					 * -DBAD_STALE_JUDGE: without the re-read) */
#ifndef BAD_STALE_JUDGE
					atomic { ok = (st[i] == ws && ow[i] == wo && lp[i] == wl && dv[i] == wd) };
#else
					ok = true;
#endif
					if :: ok -> CASB(top, t, t+1); D :: else -> skip fi
				:: cons && ws != READING -> CASB(top, t, t+1); D
				:: !cons && dd == 0 && (ws == FREE || ws == WRITING || ws == READING) ->
					/* the owner is mid-operation: look again a bounded number of times */
					if :: stale < 1 -> stale++ :: res = 1 fi
				:: else -> assert(top != t) /* ErrCorrupt on undamaged memory */
				fi
			fi
		:: else -> skip
		fi;
		if :: res != 2 -> break :: else -> skip fi
	od
}

/* the copy out of slot q (held in state s0), checked complete */
inline copyOut(q, s0) {
	atomic { assert(st[q] == s0 && ow[q] == mystamp); x1 = d1[q] };
	atomic { assert(st[q] == s0 && ow[q] == mystamp); x2 = d2[q] };
	assert(x1 == x2 && x1 >= 1 && x1 <= NMSG)
}

/* free(slot q) from the word as it is now, with the delivery of x1 */
#define freeSlot(q) freeSlotOf(q, x1)
inline freeSlotOf(q, xm) {
	do
	:: LOAD(q, rws, rwo, rwl, rwd);
		assert(rwo == mystamp && (rws == READING || rws == LEASED)); /* still ours: no repair took it */
		atomic { SCAS(q, rws, rwo, rwl, rwd, FREE, 0, rwl+1, 0, ok); if :: ok -> gown[q] = 0; DELIVER(xm) :: else -> skip fi };
		D;
		if :: ok -> break :: else -> skip fi
	od
}

/* fixBottom(stamp vs), under the repair lock */
inline fixBottom() {
	b = bottom; t = top;
	if :: b < t -> b = t :: else -> skip fi;
	k = 0;
	do
	:: k < C ->
		k++;
		atomic { lap = b / C; i = b % C };
		LOAD(i, ws, wo, wl, wd);
		dd = wl - lap;
		if
		:: dd == 0 && ws == WRITING && wo == vs && vs != 0 ->
			/* release the dead owner's claims: a single push's at b, or a
			 * push batch's run from b on, each WRITING at its own lap; the
			 * run's end found first, then released last first, so a
			 * death part way leaves a run from b (-DBAD_RELEASE_FORWARD:
			 * first to last, as the code did) */
			p = b + 1;
			do
			:: p < b + C ->
				atomic { lap = p / C; i = p % C };
				LOAD(i, ws, wo, wl, wd);
				if
				:: ws == WRITING && wo == vs && wl == lap -> p++
				:: else -> break
				fi
			:: else -> break
			od;
#ifndef BAD_RELEASE_FORWARD
			do
			:: p > b ->
				p--;
#else
			t2 = p; p = b;
			do
			:: p < t2 ->
#endif
				atomic { lap = p / C; i = p % C };
				LOAD(i, ws, wo, wl, wd);
				if
				:: ws == WRITING && wo == vs && wl == lap ->
					atomic { SCAS(i, ws, wo, wl, wd, FREE, 0, wl, 0, ok); if :: ok -> NOTLIVE(vs); gown[i] = 0 :: else -> skip fi };
					if :: !ok -> break :: else -> skip fi;
					D /* crash: deque.repair.mid-release (when more are left) */
				:: else -> break
				fi;
#ifdef BAD_RELEASE_FORWARD
				p++
#endif
			:: else -> break
			od;
			break
		:: dd == 0 && ws == READING && wo == vs && vs != 0 ->
			atomic { SCAS(i, ws, wo, wl, wd, READY, 0, wl, wd, ok); if :: ok -> NOTLIVE(vs); gown[i] = 0 :: else -> skip fi };
			D;
			if :: ok -> b++ :: else -> break fi
		:: dd == 0 && ws == READY -> b++
		:: else ->
			consumed();
			if :: cons -> b++ :: else -> break fi
		fi
	:: else -> break
	od;
	BSTORE(b); D
}

/* Deque.repair as the handle with entry myent */
inline repair() {
	lockRepair();
	if
	:: !got -> busy = true
	:: else ->
		busy = false;
		/* MarkDead */
		e = 0;
		do
		:: e < NE ->
			rdead[e] = false;
			if
			:: e != myent ->
				atomic { s = est[e]; g = egen[e] };
				judge(e, s, dead);
				if
				:: dead && (s == ECLAIMING || s == EACTIVE) ->
					atomic { if :: est[e] == s && egen[e] == g -> est[e] = EDEAD; ok = true :: else -> ok = false fi };
					D;
					if :: ok -> rdead[e] = true :: else -> skip fi
				:: dead && s == EDEAD -> rdead[e] = true
				:: else -> skip
				fi
			:: else -> skip
			fi;
			e++
		:: else -> break
		od;
		atomic { vs = ownS; vg = ownG };
		if
		:: vs == 0 -> fixBottom()
		:: vs != 0 && !(vs == mystamp && vg == mygen) ->
			holderAlive();
			if
			:: !halive ->
				fixBottom();
				/* crash: deque.repair.after-fix-bottom (the D ending fixBottom) */
				atomic { if :: ownS == vs && ownG == vg -> ownS = 0; ownG = 0 :: else -> skip fi }; D
			:: else -> skip
			fi
		:: else -> skip
		fi;
		/* dead takers' slots handed back */
		j = 0;
		do
		:: j < C ->
			LOAD(j, rws, rwo, rwl, rwd);
			if
			:: rwo != 0 && rdead[rwo-1] && (rws == READING || rws == LEASED) -> giveBack()
			:: rwo != 0 && rdead[rwo-1] && rws == WRITING -> assert(false) /* repair would report a corrupt slot */
			:: else -> skip
			fi;
			j++
		:: else -> break
		od;
		j = 0;
		/* FreeDead */
		e = 0;
		do
		:: e < NE ->
			if
			:: e != myent && rdead[e] ->
				atomic { s = est[e]; g = egen[e] };
				if
				:: s == EDEAD -> atomic { if :: est[e] == EDEAD && egen[e] == g -> est[e] = EFREE; egen[e] = g+1 :: else -> skip fi }; D
				:: else -> skip
				fi
			:: else -> skip
			fi;
			e++
		:: else -> break
		od;
		unlockRepair()
	fi
}

/* healSlot: repair if the stamp wo names an entry proven dead */
inline heal() {
	if
	:: wo != 0 ->
		atomic { s = est[wo-1] };
		judge(wo-1, s, dead);
		if :: dead && s != EFREE -> repair() :: else -> skip fi
	:: else -> skip
	fi
}

/* Adopt: adopted */
inline adopt() {
	adopted = false;
	if
	:: gowner[me] -> adopted = true
	:: else ->
		lockRepair();
		if
		:: got ->
			atomic { vs = ownS; vg = ownG };
			halive = false;
#ifndef BAD_ADOPT_NOPROOF
			if :: vs != 0 -> holderAlive() :: else -> skip fi;
#endif
			if
			:: !halive ->
				fixBottom();
				/* crash: deque.adopt.after-fix-bottom (the D ending fixBottom) */
				atomic { if :: ownS == vs && ownG == vg -> ownS = mystamp; ownG = mygen; gowner[me] = true; adopted = true :: else -> skip fi };
				D
			:: else -> skip
			fi;
			unlockRepair()
		:: else -> skip
		fi
	fi
}

/* claimBottom: up to the CAS that takes the position at bottom (b, slot
 * i, lap lap); res 0 taken, 1 full */
inline claimBottom() {
	do
	:: b = bottom;
		if
		:: b - tseen >= C || b < tseen -> tseen = top
		:: else -> skip
		fi;
		t = tseen;
		assert(!(b >= t && b - t > C) && b >= t); /* ErrCorrupt */
		if
		:: b - t == C -> res = 1; break
		:: else -> skip
		fi;
		atomic { lap = b / C; i = b % C };
		LOAD(i, ws, wo, wl, wd);
		dd = wl - lap;
		if
		:: dd == 0 && ws == FREE && wo == 0 && wd == 0 ->
			atomic { SCAS(i, ws, wo, wl, wd, WRITING, mystamp, lap, 0, ok); if :: ok -> TOOK(i) :: else -> skip fi };
			if :: ok -> res = 0; break :: else -> skip fi
		:: (dd == -1 || dd == 0) && ws == RETURNED ->
			SCAS(i, ws, wo, wl, wd, READY, 0, lap, wd, ok);
			if
			:: ok -> D; /* crash: deque.push.after-republish */
				BSTORE(b+1); D; UNCOUNT; D
			:: else -> skip
			fi
		:: dd == -1 && (ws == LEASED || ws == POISONED) ->
			SCAS(i, ws, wo, wl, wd, ws, wo, lap, wd, ok);
			if
			:: ok -> D; /* crash: deque.push.after-burn */
				BSTORE(b+1); D
			:: else -> skip
			fi
		:: (dd == 0 && (ws == LEASED || ws == POISONED || (ws == READING && wo != mystamp))) || (dd == 1 && ws == FREE) ->
			BSTORE(b+1); D
		:: dd == -1 && ws == READING -> res = 1; break
		:: else -> assert(false) /* ErrCorrupt on undamaged memory */
		fi
	od
}

/* Push blocked: bottomSlot judged (healSlot) */
#define PUSHHEAL if :: wo = ow[(bottom) % C]; heal() :: skip fi

/* claimBottom + pushBottom of message m: res 0 pushed, 1 full */
inline push(m) {
	claimBottom();
	if
	:: res == 0 ->
		D; /* crash: deque.push.after-claim */
		atomic { MINE(i, WRITING, lap); d1[i] = m }; D;
		atomic { MINE(i, WRITING, lap); d2[i] = m }; D;
		atomic { MINE(i, WRITING, lap); st[i] = READY; ow[i] = 0; dv[i] = 0; gown[i] = 0 };
		D; /* crash: deque.push.after-write */
		BSTORE(b+1);
		D; /* crash: deque.push.after-publish */
		pushedRet[m] = true
	:: else -> PUSHHEAL
	fi
}

/* pushRun (deque_batch.go) of messages 1 and 2: claimBottom, the next
 * position claimed by the CAS FREE(L) -> WRITING(L, me) if it is inside
 * the window and exactly free, then each written and published, then
 * bottom moved past the run once. kk: how many the run took (0: full). */
inline pushRun2() {
	kk = 0;
	claimBottom();
	if
	:: res == 0 ->
		kk = 1;
		if
		:: C > 1 ->
			p = b + 1;
			if :: p - tseen >= C -> tseen = top :: else -> skip fi;
			if
			:: p - tseen < C ->
				atomic { lap = p / C; j = p % C };
				atomic { SCAS(j, FREE, 0, lap, 0, WRITING, mystamp, lap, 0, ok); if :: ok -> TOOK(j); kk = 2 :: else -> skip fi };
				j = 0
			:: else -> skip
			fi
		:: else -> skip
		fi;
		D; /* crash: deque.push-batch.after-claims */
		nw = 0;
		do
		:: nw < kk ->
			atomic { lap = (b+nw) / C; i = (b+nw) % C };
			atomic { MINE(i, WRITING, lap); d1[i] = 1+nw }; D;
			atomic { MINE(i, WRITING, lap); d2[i] = 1+nw }; D;
			atomic { MINE(i, WRITING, lap); st[i] = READY; ow[i] = 0; dv[i] = 0; gown[i] = 0 };
			D; /* crash: deque.push-batch.mid-publish, deque.push-batch.after-publish */
			nw++
		:: else -> break
		od;
		BSTORE(b+kk);
		D; /* crash: deque.push-batch.after-advance */
		nw = 0;
		pushedRet[1] = true;
		if :: kk == 2 -> pushedRet[2] = true :: else -> skip fi
	:: else -> PUSHHEAL
	fi
}

/* popReturned: res 0 popped, 1 empty */
inline popReturned() {
	takeReturned(LEASED);
	if
	:: res == 0 -> copyOut(i, LEASED); freeSlot(i)
	:: else -> skip
	fi
}

/* pop as the owner (popBottom; a message over the limit taken from the top) */
inline pop() {
	do
	:: b = bottom; t = top;
		if
		:: b <= t ->
			if :: pending != 0 -> popReturned() :: else -> res = 1 fi;
			break
		:: else -> skip
		fi;
		p = b - 1;
		atomic { lap = p / C; i = p % C };
		BSTORE(p);
		D; /* crash: deque.pop.after-announce */
		LOAD(i, ws, wo, wl, wd);
		dd = wl - lap;
		if
		:: dd == 0 && ws == READY && wd >= LIMIT ->
			BSTORE(b); D;
			steal(LEASED);
			if :: res == 0 -> copyOut(i, LEASED); freeSlot(i) :: else -> skip fi;
			break
		:: dd == 0 && ws == READY && wd < LIMIT ->
			atomic { SCAS(i, ws, wo, wl, wd, READING, mystamp, lap, wd+1, ok); if :: ok -> TOOK(i) :: else -> skip fi };
			if
			:: !ok -> BSTORE(b); D
			:: else ->
				D; /* crash: deque.pop.after-take */
				copyOut(i, READING);
				D; /* crash: deque.pop.after-copy */
				atomic { MINE(i, READING, lap); st[i] = FREE; ow[i] = 0; dv[i] = 0; gown[i] = 0; DELIVER(x1) };
				D;
				res = 0; break
			fi
		:: else ->
			consumed();
			if
			:: cons || (dd == 0 && ws == READING && wo == mystamp) ->
				t2 = top;
				if
				:: p > t2 -> skip /* burned: step below it */
				:: else ->
					BSTORE(b); D;
					CASB(top, p, p+1); D;
					if :: pending != 0 -> popReturned() :: else -> res = 1 fi;
					break
				fi
			:: else -> assert(false) /* ErrCorrupt on undamaged memory */
			fi
		fi
	od
}

/* popRunBottom (deque_batch.go): up to nb messages at the bottom, newest
 * first. The run is announced at once (bottom lowered past it), each
 * READY position taken by popBottom's CAS from b-1 down; a consumed
 * position above top is a burn (stepped below), at or below top a
 * thief's take (the run stops, top helped past it); bottom goes back to
 * the lowest position taken or stepped below; then every message is
 * copied out, and only then the slots freed, highest first.
 * nt: taken; res 0 (go on), 1 empty, 4 take from the top. */
inline popRunBottom() {
	b = bottom; t = top;
	nt = 0;
	if
	:: b <= t -> res = 1
	:: else ->
		lo = b - (nb < b - t -> nb : b - t);
		BSTORE(lo);
		D; /* crash: deque.pop-batch.after-announce */
		low = b; stolen = false; res = 0;
		p = b;
		do
		:: p > lo ->
			p--;
			atomic { lap = p / C; i = p % C };
			LOAD(i, ws, wo, wl, wd);
			dd = wl - lap;
			if
			:: dd == 0 && ws == READY && wd >= LIMIT -> res = 4; break
			:: dd == 0 && ws == READY && wd < LIMIT ->
				atomic { SCAS(i, ws, wo, wl, wd, READING, mystamp, lap, wd+1, ok); if :: ok -> TOOK(i) :: else -> skip fi };
				if
				:: !ok -> break /* a thief won it */
				:: else ->
					tpos[nt] = p; nt++; low = p;
					if :: p > lo -> D /* crash: deque.pop-batch.mid-take */ :: else -> skip fi
				fi
			:: else ->
				consumed();
				if
				:: cons || (dd == 0 && ws == READING && wo == mystamp) ->
					t2 = top;
					if
					:: p > t2 -> low = p /* burned: step below it */
					:: else -> stolen = true; break
					fi
				:: else -> assert(false) /* ErrCorrupt on undamaged memory */
				fi
			fi
		:: else -> break
		od;
		if :: low != lo -> BSTORE(low); D :: else -> skip fi;
		if :: stolen -> CASB(top, low-1, low); D :: else -> skip fi;
		if
		:: nt > 0 ->
			D; /* crash: deque.pop-batch.after-take */
			j = 0;
			do
			:: j < nt -> i = tpos[j] % C; copyOut(i, READING); pay[j] = x1; j++
			:: else -> break
			od;
			D; /* crash: deque.pop-batch.after-copy */
			j = 0;
			do
			:: j < nt ->
				atomic { i = tpos[j] % C; lap = tpos[j] / C };
				atomic { MINE(i, READING, lap); st[i] = FREE; ow[i] = 0; dv[i] = 0; gown[i] = 0; DELIVER(pay[j]) };
				j++;
				if :: j < nt -> D /* crash: deque.pop-batch.mid-free */ :: else -> skip fi
			:: else -> break
			od;
			j = 0;
			D
		:: else -> skip
		fi
	fi
}

/* popBatchBottom of 2 buffers: runs while they go on; where a run cannot,
 * popBottom's ways (a returned message when empty, a message at the
 * delivery limit taken from the top). nn: popped. */
inline popBatch2() {
	nn = 0;
	do
	:: nn < 2 ->
		nb = 2 - nn;
		popRunBottom();
		nn = nn + nt;
		if
		:: res == 0 -> skip
		:: res == 1 && pending != 0 -> popReturned(); if :: res == 0 -> nn++ :: else -> break fi
		:: res == 4 -> steal(LEASED); if :: res == 0 -> copyOut(i, LEASED); freeSlot(i); nn++ :: else -> break fi
		:: else -> break
		fi
	:: else -> break
	od
}

/* stealRun (deque_batch.go) of 2: each message taken by steal (slot CAS,
 * then top) before the next, then both copied out, then both freed. ns:
 * taken. */
inline stealRun2(ns_) {
	ns = 0;
	do
	:: ns < 2 ->
		steal(ns_);
		if :: res == 0 -> spos[ns] = i; ns++ :: else -> break fi
	:: else -> break
	od;
	if
	:: ns > 0 ->
		D; /* crash: deque.steal-batch.after-take */
		nw = 0;
		do
		:: nw < ns -> copyOut(spos[nw], ns_); pay[nw] = x1; nw++
		:: else -> break
		od;
		D; /* crash: deque.steal-batch.after-copy */
		nw = 0;
		do
		:: nw < ns ->
			freeSlotOf(spos[nw], pay[nw]);
			nw++;
			if :: nw < ns -> D /* crash: deque.steal-batch.mid-free */ :: else -> skip fi
		:: else -> break
		od;
		nw = 0
	:: else -> skip
	fi
}

/* Close of a handle that holds no lease: the owner role given up, the entry freed */
inline closeHandle() {
	if
	:: gowner[me] -> atomic { if :: ownS == mystamp && ownG == mygen -> ownS = 0; ownG = 0 :: else -> skip fi; gowner[me] = false }; D
	:: else -> skip
	fi;
	atomic { assert(est[myent] == EACTIVE && egen[myent] == mygen); est[myent] = EFREE; egen[myent] = mygen+1; gent[myent] = 0 };
	D;
	elock[myent] = 0; mystamp = 0;
	D
}

proctype owner() {
	byte me = OWNER;
	byte tseen = 0;
	byte nc;
	LOCALS;
	mystamp = 1; myent = 0; mygen = 0;
	D;
	/* the calls are counted in nc, a local no inline touches (copyOut
	 * sets x2: counting pops in x2 once made NPOP=2 run one pop) */
#ifndef DQBATCH
	nc = 1;
	do
	:: nc <= NPUSH -> push(nc); nc++
	:: else -> break
	od;
	nc = 0;
	do
	:: nc < NPOP -> pop(); nc++
	:: else -> break
	od;
#else
	/* TryPushBatch of messages 1 and 2 (a second run for message 2 if the
	 * first took one: a run of one is pushBottom's steps), then one
	 * TryPopBatch of 2 */
	pushRun2();
	if :: kk == 1 -> push(2) :: else -> skip fi;
	RESET;
	popBatch2();
#endif
	closeHandle();
	nfin++;
	goto end;
	DIE;
end:
	RESET
}

proctype thief() {
	byte me = THIEF;
	LOCALS;
	mystamp = 2; myent = 1; mygen = 0;
	D;
#ifndef CLAIM
#ifndef DQBATCH
	steal(READING);
	if
	:: res == 0 ->
		copyOut(i, READING);
		D; /* crash: deque.steal.after-copy */
		freeSlot(i)
	:: else ->
#else
	/* TryStealBatch of 2 */
	stealRun2(READING);
	if
	:: ns > 0 -> skip
	:: else ->
#endif
		/* Steal blocked: topSlot judged (healSlot) */
		if
		:: t = top; b = bottom;
			if
			:: b > t -> wo = ow[t % C]
			:: else ->
				atomic { lap = t / C; i = t % C; ws = st[i]; wo = ow[i]; wl = lp[i] };
				if :: ws == READY && wl == lap -> wo = ownS :: else -> skip fi
			fi;
			heal()
		:: skip
		fi
	fi
#else
	steal(LEASED);
	if
	:: res == 0 ->
		j = i;
		copyOut(j, LEASED);
		DELIVER(x1);
		D; /* test.lease.processing; crash: deque.claim-batch.after-take (claimBatch is a loop of steal(LEASED), nothing between: docs/design.md) */
		if
		:: /* Ack */
			do
			:: LOAD(j, rws, rwo, rwl, rwd);
				assert(rws == LEASED && rwo == mystamp);
				D; /* crash: deque.ack.before-free */
				atomic { SCAS(j, rws, rwo, rwl, rwd, FREE, 0, rwl+1, 0, ok); if :: ok -> gown[j] = 0 :: else -> skip fi };
				D; /* crash: deque.ack-batch.mid-free (AckBatch is a loop of ack: after one's free CAS) */
				if :: ok -> break :: else -> skip fi
			od
		:: /* Release */
			mayRedeliver[x1] = true;
			LOAD(j, rws, rwo, rwl, rwd);
			assert(rws == LEASED && rwo == mystamp);
			giveBack();
			assert(ok)
		fi
	:: else -> skip
	fi
#endif
	closeHandle();
	nfin++;
	goto end;
	DIE;
end:
	RESET
}

proctype adopter() {
	byte me = ADOPTER;
	byte tseen = 0;
	LOCALS;
	mystamp = 3; myent = 2; mygen = 0;
	D;
	adopt();
	if
	:: adopted ->
		atomic { t = top; tseen = t };  /* the handle's first look at top */
		push(MADOPT);
		pop()
	:: else -> skip
	fi;
	closeHandle();
	nfin++;
	goto end;
	DIE;
end:
	RESET
}

/* After every worker ended: attach, Repair, Adopt, drain as the owner,
 * then every message whose push returned must have been delivered. */
proctype drainer() {
	byte me = DRAINER;
	byte tseen = 0;
	LOCALS;
	mortal = false;
	nfin == NWORK;
	atomic { elock[3] = me+1; g = egen[3]; est[3] = EACTIVE; gent[3] = me+1 };
	myent = 3; mystamp = 4; mygen = g;
	repair();
	assert(!busy);
	adopt();
	assert(adopted);
	tseen = top;
	do
	:: pop(); if :: res != 0 -> break :: else -> skip fi
	od;
	/* nothing left held or hidden; poison taken */
	i = 0;
	do
	:: i < C ->
		assert(st[i] != READING && st[i] != RETURNED && st[i] != WRITING && st[i] != LEASED);
		if :: st[i] == POISONED -> poisonTaken[d1[i]] = true :: else -> skip fi;
		i++
	:: else -> break
	od;
	k = 1;
	do
	:: k <= NMSG -> assert(!pushedRet[k] || ndeliv[k] > 0 || poisonTaken[k]); k++
	:: else -> break
	od;
	finished = true;
	goto end;
	DIE;
end:
	RESET
}

init {
	byte n;
	atomic {
		n = 0;
		do :: n < NPROC -> alive[n] = true; n++ :: else -> break od;
		/* created by the owner; the thief (and adopter) attached */
		est[0] = EACTIVE; elock[0] = OWNER+1; gent[0] = OWNER+1;
		est[1] = EACTIVE; elock[1] = THIEF+1; gent[1] = THIEF+1;
		ownS = 1; ownG = 0; gowner[OWNER] = true;
		run owner();
		run thief();
#ifdef WITH_ADOPTER
		est[2] = EACTIVE; elock[2] = ADOPTER+1; gent[2] = ADOPTER+1;
		run adopter();
#else
		nfin++;
#endif
		run drainer()
	}
}

ltl delivered { <> finished }
