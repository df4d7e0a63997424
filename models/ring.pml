/*
 * ring.pml: the ring's protocol (transport/ring_push.go, ring_pop.go,
 * ring_batch.go, ring_loan.go, ring_repair.go, ring_peers.go, ring_wait.go,
 * slots.go, transport/internal/peers/table.go) as the code implements it,
 * with a process death possible after every step that touches shared
 * memory (macro D). docs/design.md, "Models", says what is modelled, what
 * is abstracted and why the abstractions hide no bug.
 *
 * Comments of the form "crash: NAME" mark the step of the model that a
 * crash point of the code corresponds to (the D right after it is where a
 * death at that point lands); every_crash_point_has_a_model_step_or_a_crash_window_row_test.go checks that every
 * crash point of the code is named here or in the deque model, or has a
 * row in docs/design.md's crash-window tables.
 *
 * Known-bad variants (models/check.sh builds each and requires a
 * counterexample):
 *   BAD_NOPROOF  the judge of a claiming or active entry may call it dead
 *                without looking at its entry lock (a repair on a guess,
 *                like a timeout), so repairs may act on live owners;
 *   BAD_BURN_ANY a producer burns past a slot of the last lap whatever
 *                its state (a READING slot too), so it takes a slot that
 *                a live consumer is still copying out.
 */

#ifdef NPOP
#error "ring.pml counts the popper's calls with POPS (NPOP is deque.pml's)"
#endif
#ifndef C
#define C 2            /* capacity (slots) */
#endif
#ifndef MAXD
#define MAXD 1         /* deaths in one run */
#endif
#ifndef POPS
#define POPS 1         /* the popper's calls */
#endif
#ifndef LIMIT
#define LIMIT 3        /* delivery limit (1 in the *-poison configurations: a redelivered message is set aside) */
#endif
#ifndef M0
#define M0 1           /* producer 0's messages: ids 1..M0; producer 1 sends M0+1 */
#endif
#define NMSG (M0+1)

/* processes (model ids) */
#define P0 0           /* producer: messages 1 and 2, one TryPushBatch or two TryPush */
#define P1 1           /* producer: message 3, TryPush, or a loan published or aborted */
#define POPPER 2       /* TryPop, TryPopBatch; heals the ring when blocked behind a dead owner */
#define CLAIMER 3      /* TryClaim then Ack or Release */
#define REPAIRER 4     /* Repair through the repairer entry (OpenRingForRepair) */
#define DRAINER 5      /* after all others: attach, Repair, drain; never dies */
#define NPROC 6
#define NWORK 5        /* all but the drainer */

/* participant entries: 0..3 for the four attached workers; 4 the repairer entry */
#define NP 4
#define RE 4
#define NE 5

/* slot states (layout.SlotState) */
#define FREE 0
#define WRITING 1
#define READY 2
#define READING 3
#define LEASED 4
#define POISONED 5

/* entry states (layout.PeerState) */
#define EFREE 0
#define ECLAIMING 1
#define EACTIVE 2
#define EDEAD 3

/* recoverSlot's answers */
#define NOTHING 0
#define ABANDONED 1
#define REQUEUED 2
#define INPLACE 3
#define DEFERRED 4

/* ---- shared memory ---- */
byte st[C]; byte ow[C]; byte lp[C]; byte dv[C];   /* the slot word: state, owner stamp, lap, deliveries */
byte d1[C]; byte d2[C];                           /* the payload: a message id written in two halves */
byte tail, head;
byte deferredW;                                   /* ring.deferred */
byte lockE, lockG;                                /* ring.repair_lock: stamp and generation */
byte est[NE]; byte egen[NE];                      /* participant entries' control words */
byte elock[NE];                                   /* entry locks (OFD): holder model id + 1, 0 none */

/* ---- ghosts (the checker's knowledge; no process reads them to decide) ---- */
bool alive[NPROC];
byte ndeaths;
byte gent[NE];        /* which live process holds entry e as its own: id + 1 */
byte gown[C];         /* which process believes it owns slot i (took it): id + 1 */
byte ndeliv[NMSG+1];  /* times each message was handed to a caller */
bool mayRedeliver[NMSG+1]; /* a holder of the message died or released it */
bool pushedRet[NMSG+1];    /* its push (or Publish) returned */
bool aborted[NMSG+1];      /* its loan was aborted */
bool poisonTaken[NMSG+1];
#ifdef REACH_POISON
/* a reachability probe, not a property (models/check.sh requires it to
 * fail): some run sets a message aside as poison, a producer burns past
 * a poison, and the drainer's TakePoisoned takes one */
bool reachSetAside, reachBurn, reachTaken;
#endif
byte nfin;            /* workers finished or dead */
bool finished;        /* the drainer checked every delivery */

#define LIVEENT(e) (gent[e] != 0 && alive[gent[e]-1])

/* A death may land here: the process stops for good, its memory stays as
 * it is and the kernel drops its entry locks (the oracle: an entry lock
 * nobody holds). The death is counted in the step that decides it, so
 * MAXD bounds a run's deaths exactly (before, two processes could both
 * pass the guard before either counted). */
#define D if :: atomic { (mortal && ndeaths < MAXD) -> ndeaths++ }; goto died :: skip fi

#define LOCALS \
	bool mortal = true; byte mystamp; byte myent; byte mygen; \
	byte t, lap, i, ws, wo, wl, wd, hd, burnedHere, res, k, x1, x2, got; \
	int dd; bool ok; \
	byte rj, rws, rwo, rwl, rwd, rowner, rwhat, pass, ndef, nreq, t2, s, g, le, lg, e; \
	bool progress, parked, lost, anyDead, inherited, keepSelf, busy, dead; \
	bool rdead[NE]; bool keep[NE]

#define DIE \
died: skip; \
	d_step { \
		alive[me] = false; nfin++; \
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

/* locals back to 0 where a process ends (and between calls), so that
 * states differing only in dead locals are one state */
#define RESET atomic { t = 0; lap = 0; i = 0; ws = 0; wo = 0; wl = 0; wd = 0; hd = 0; burnedHere = 0; res = 0; x1 = 0; x2 = 0; got = 0; \
	dd = 0; ok = 0; rj = 0; rws = 0; rwo = 0; rwl = 0; rwd = 0; rowner = 0; rwhat = 0; pass = 0; ndef = 0; nreq = 0; t2 = 0; s = 0; g = 0; le = 0; lg = 0; e = 0; \
	progress = 0; parked = 0; lost = 0; anyDead = 0; busy = 0; dead = 0; keepSelf = 0; \
	e = 0; do :: e < NE -> rdead[e] = 0; keep[e] = 0; e++ :: else -> break od; e = 0 }

#define LOAD(j, a, b, c, f) atomic { a = st[j]; b = ow[j]; c = lp[j]; f = dv[j] }

/* CAS on a slot word from (os,oo,ol,od) to (ns,no,nl,nd) */
#define SCAS(j, os, oo, ol, od, ns, no, nl, nd, r) \
	atomic { \
		if \
		:: (st[j] == os && ow[j] == oo && lp[j] == ol && dv[j] == od) -> \
			st[j] = ns; ow[j] = no; lp[j] = nl; dv[j] = nd; r = true \
		:: else -> r = false \
		fi \
	}

#define CASB(v, o, n) atomic { if :: v == o -> v = n :: else -> skip fi }

/* A store that the code makes without a CAS (payload halves, READY,
 * FREE after a pop): the slot word must still be the one this process
 * left, or the store would clobber another's. */
#define MINE(j, s0, l0) assert(st[j] == s0 && ow[j] == mystamp && lp[j] == l0)

/* ---------------------------------------------------------------- */
/* The entry lock judge (shm.Region.JudgeEntry + peers.Table.Status).
 * Entry e's word was read as (s, g). dead: proven dead. */
inline judge(e, s, dead) {
	if
	:: e == myent && mystamp != 0 -> dead = false      /* "this handle" */
	:: else ->
		if
		:: s == EDEAD -> dead = true
		:: s == ECLAIMING || s == EACTIVE ->
#ifdef BAD_NOPROOF
			if
			:: dead = (elock[e] == 0)
			:: dead = true
			fi
#else
			dead = (elock[e] == 0)
#endif
		:: else -> dead = false
		fi
	fi
}

/* ---------------------------------------------------------------- */
/* claimTail (ring_push.go): up to the CAS that takes a position */
inline claimTail() {
	burnedHere = 0;
	do
	:: t = tail;
		/* positions are bytes: a run that gets near the wrap is running
		 * laps away (a livelock), which must be reported as such, not
		 * as the corrupt word the wrap makes */
		assert(t < 240);
		D;
		lap = t / C; i = t % C;
		LOAD(i, ws, wo, wl, wd); D;
		dd = wl - lap;
		if
		:: dd == 0 && ws == FREE ->
			atomic {
				SCAS(i, FREE, 0, lap, 0, WRITING, mystamp, lap, 0, ok);
				if
				:: ok -> assert(gown[i] == 0 || !alive[gown[i]-1]); gown[i] = me+1
				:: else -> skip
				fi
			}
			if
			:: ok -> res = 0; break
			:: else -> D
			fi
		:: (dd == 0 && ws != FREE) || dd == 1 ->
			CASB(tail, t, t+1); D
#ifdef BAD_BURN_ANY
		:: dd == -1 && ws != FREE ->
#else
		:: dd == -1 && (ws == LEASED || ws == POISONED) ->
#endif
			hd = head; D;
			if
			:: burnedHere >= C || t - hd >= C -> res = 1; break
			:: else ->
				SCAS(i, ws, wo, wl, wd, ws, wo, lap, wd, ok);
				if
				:: ok -> burnedHere++;
#ifdef REACH_POISON
					if :: ws == POISONED && me <= P1 -> reachBurn = true :: else -> skip fi;
#endif
#ifdef BAD_BURN_ANY
					/* the burner takes the slot for its own message */
					if
					:: ws == READING ->
						atomic { st[i] = WRITING; ow[i] = mystamp; dv[i] = 0; gown[i] = me+1 }
						res = 0; break
					:: else -> skip
					fi;
#endif
					D; /* crash: ring.push.after-burn */
					CASB(tail, t, t+1); D
				:: else -> D
				fi
			fi
		:: dd == -1 && (ws == READY || ws == WRITING || ws == READING) ->
			if
			:: tail == t -> res = 1; break
			:: else -> D
			fi
		:: else ->
			/* ErrCorrupt on memory no process damaged: a model bug or a protocol bug */
			assert(tail != t); D
		fi
	od
}

/* push (ring_push.go): message m (or the payload of slot src when src < C),
 * with delivery count dl. res: 0 pushed, 1 full. */
inline push(m, src, dl) {
	claimTail();
	if
	:: res == 0 ->
		D; /* crash: ring.push.after-claim, ring.loan.after-claim */
		CASB(tail, t, t+1);
		D; /* crash: ring.push.after-advance, ring.loan.after-advance */
		atomic { MINE(i, WRITING, lap); d1[i] = (src < C -> d1[src] : m) }
		D; /* test.loan.writing */
		atomic { MINE(i, WRITING, lap); d2[i] = (src < C -> d2[src] : m) }
		D; /* crash: ring.push.after-write, ring.publish.before-ready */
		atomic { MINE(i, WRITING, lap); st[i] = READY; ow[i] = 0; dv[i] = dl; gown[i] = 0 }
		D  /* crash: ring.push.after-publish, ring.publish.after-ready */
	:: else -> skip
	fi
}

/* ---------------------------------------------------------------- */
/* stillHeld (ring_repair.go) */
inline stillHeld() {
	LOAD(rj, rws, rwo, rwl, rwd); D;
	ok = (rwo == rowner && (rws == READING || rws == LEASED))
}

/* a repair's change of a slot owned by rowner: never a live process's */
#define NOTLIVE assert(rowner == mystamp || !LIVEENT(rowner-1))

/* recoverInPlace: rwhat, lost */
inline recoverInPlace() {
	t2 = tail; D;
	lost = false;
	if
	:: t2 % C != rj || t2 / C != rwl + 1 -> rwhat = DEFERRED
	:: else ->
		atomic {
			SCAS(rj, rws, rwo, rwl, rwd, READY, 0, rwl+1, rwd, ok);
			if :: ok -> NOTLIVE; gown[rj] = 0 :: else -> skip fi
		}
		if
		:: !ok -> D; rwhat = NOTHING; lost = true
		:: else -> D; CASB(tail, t2, t2+1); D; rwhat = INPLACE
		fi
	fi
}

/* recoverSlot (ring_repair.go): slot rj, word (rws, rwo, rwl, rwd) naming rowner */
inline recoverSlot() {
	rowner = rwo;
	do
	:: rws != READING && rws != LEASED ->
		if
		:: rws == WRITING ->
			atomic {
				SCAS(rj, WRITING, rwo, rwl, rwd, FREE, 0, rwl+1, 0, ok);
				if :: ok -> NOTLIVE; gown[rj] = 0 :: else -> skip fi
			}
			D;
			rwhat = (ok -> ABANDONED : NOTHING)
		:: else -> rwhat = NOTHING
		fi;
		break
	:: else ->
		push(0, rj, rwd);
		if
		:: res == 1 ->
			stillHeld();
			if
			:: !ok -> rwhat = NOTHING; break
			:: else -> skip
			fi;
			recoverInPlace();
			if
			:: !lost -> break
			:: else -> skip
			fi;
			stillHeld();
			if
			:: !ok -> rwhat = NOTHING; break
			:: else -> skip
			fi
		:: else ->
			/* crash: ring.repair.after-requeue */
			do
			:: atomic {
					SCAS(rj, rws, rwo, rwl, rwd, FREE, 0, rwl+1, 0, ok);
					if :: ok -> NOTLIVE; gown[rj] = 0 :: else -> skip fi
				}
				D;
				if
				:: ok -> rwhat = REQUEUED; break
				:: else ->
					stillHeld();
					if
					:: !ok -> rwhat = NOTHING; break
					:: else -> skip
					fi
				fi
			od;
			break
		fi
	od
}

/* park (ring_repair.go): the dead owner's lease or read moves to the
 * repairer entry (mystamp). ok: parked. */
inline parkSlot() {
	stillHeld();
	do
	:: ok ->
		atomic {
			SCAS(rj, rws, rwo, rwl, rwd, rws, mystamp, rwl, rwd, ok);
			if :: ok -> NOTLIVE :: else -> skip fi
		}
		D;
		if
		:: ok -> break
		:: else -> stillHeld()
		fi
	:: else -> break
	od
}

/* LockRepairFrom / TakeRoleFrom (peers/table.go): got */
inline lockRepair() {
	do
	:: atomic { le = lockE; lg = lockG }; D;
		if
		:: le == 0 ->
			atomic { if :: lockE == 0 -> lockE = mystamp; lockG = mygen; got = true :: else -> got = false fi }
			D;
			if :: got -> break :: else -> skip fi
		:: le == mystamp && lg == mygen -> got = false; break
		:: else ->
			/* HolderAlive */
			e = le - 1;
			atomic { s = est[e]; g = egen[e] }; D;
			judge(e, s, dead); D;
			if
			:: (s == EACTIVE || s == ECLAIMING) && g == lg && !dead -> got = false; break
			:: else ->
				atomic { if :: lockE == le && lockG == lg -> lockE = mystamp; lockG = mygen; got = true :: else -> got = false fi }
				D;
				if :: got -> break :: else -> skip fi
			fi
		fi
	od
}

/* Ring.repair(park) as the handle with entry myent (stamp mystamp).
 * busy: ErrRepairBusy. */
inline repair(park) {
	busy = false; keepSelf = false; parked = false; nreq = 0;
	lockRepair();
	if
	:: !got -> busy = true
	:: else ->
		deferredW = 0; D;
		/* MarkDead */
		anyDead = false;
		e = 0;
		do
		:: e < NE ->
			rdead[e] = false;
			if
			:: e == myent ->
				if :: inherited -> rdead[e] = true; anyDead = true :: else -> skip fi
			:: else ->
				atomic { s = est[e]; g = egen[e] }; D;
				judge(e, s, dead); D;
				if
				:: dead && (s == ECLAIMING || s == EACTIVE) ->
					atomic { if :: est[e] == s && egen[e] == g -> est[e] = EDEAD; ok = true :: else -> ok = false fi }
					D;
					if :: ok -> rdead[e] = true; anyDead = true :: else -> skip fi
				:: dead && s == EDEAD -> rdead[e] = true; anyDead = true
				:: else -> skip
				fi
			fi;
			e++
		:: else -> break
		od;
		/* the slots of dead owners, in passes while deferred ones make progress */
		pass = 0; ndef = 0;
		do
		:: anyDead ->
			progress = false; ndef = 0;
			e = 0; do :: e < NE -> keep[e] = false; e++ :: else -> break od;
			rj = 0;
			do
			:: rj < C ->
				LOAD(rj, rws, rwo, rwl, rwd); D;
				if
				:: rwo != 0 && rdead[rwo-1] ->
					recoverSlot();
					if
					:: rwhat == ABANDONED -> progress = true
					:: rwhat == REQUEUED || rwhat == INPLACE -> progress = true; nreq++
					:: rwhat == DEFERRED ->
						keep[rowner-1] = true; ndef++;
						if
						:: park && myent == RE ->
							parkSlot();
							if :: ok -> keep[rowner-1] = false; parked = true :: else -> skip fi
						:: else -> skip
						fi
					:: else -> skip
					fi
				:: else -> skip
				fi;
				rj++
			:: else -> break
			od;
			if
			:: ndef == 0 || !progress || pass >= C -> break
			:: else -> pass++
			fi
		:: else -> break
		od;
		if
		:: ndef > 0 -> deferredW = deferredW + ndef; D
		:: else -> skip
		fi;
		if :: parked -> keep[RE] = true :: else -> skip fi;
		/* FreeDead */
		e = 0;
		do
		:: e < NE ->
			if
			:: e == myent -> if :: keep[e] && myent == RE -> keepSelf = true :: else -> skip fi
			:: else ->
				if
				:: rdead[e] && !keep[e] ->
					atomic { s = est[e]; g = egen[e] }; D;
					if
					:: s == EDEAD ->
						atomic { if :: est[e] == EDEAD && egen[e] == g -> est[e] = EFREE; egen[e] = g+1 :: else -> skip fi }
						D
					:: else -> skip
					fi
				:: else -> skip
				fi
			fi;
			e++
		:: else -> break
		od;
		/* UnlockRepair */
		CASB(lockE, mystamp, 0); /* and lockG with it: one word */
		atomic { if :: lockE == 0 && lockG == mygen -> lockG = 0 :: else -> skip fi }
		D
	fi
}

/* AsRepairer (peers/table.go) + Ring.repairAs: repair as the repairer entry */
inline asRepairer(park) {
	atomic { if :: elock[RE] == 0 -> elock[RE] = me+1; got = true :: else -> got = false fi }
	if
	:: !got -> busy = true /* another holds the repairer entry */
	:: else ->
		D;
		do
		:: atomic { s = est[RE]; g = egen[RE] };
			inherited = (s != EFREE);
			mygen = (inherited -> g+1 : g);
			atomic { if :: est[RE] == s && egen[RE] == g -> est[RE] = ECLAIMING; egen[RE] = mygen; ok = true :: else -> ok = false fi }
			D;
			if :: ok -> break :: else -> skip fi
		od;
		atomic { est[RE] = EACTIVE; gent[RE] = me+1 };
		myent = RE; mystamp = RE+1;
		D; /* crash: peers.repairer.after-claim */
		repair(park);
		D; /* crash: peers.repairer.before-release */
		atomic {
			if
			:: (busy && inherited) || keepSelf -> est[RE] = EDEAD
			:: else -> est[RE] = EFREE; egen[RE] = mygen+1
			fi;
			gent[RE] = 0
		}
		D;
		elock[RE] = 0; mystamp = 0; myent = 255;
		D;
		if :: est[RE] == EDEAD -> deferredW++ :: else -> skip fi; D
	fi
}

/* Attach of a worker to entry k (peers.Table.claim) */
inline attachTo(k) {
	atomic { elock[k] = me+1 };
	D;
	atomic { g = egen[k]; assert(est[k] == EFREE); est[k] = ECLAIMING };
	D; /* crash: peers.attach.after-claim-entry */
	atomic { est[k] = EACTIVE; gent[k] = me+1 };
	myent = k; mystamp = k+1; mygen = g;
	D
}

/* Close: the table entry freed (Release(false)); our workers hold nothing at Close */
inline detach() {
	atomic { assert(est[myent] == EACTIVE && egen[myent] == mygen); est[myent] = EFREE; egen[myent] = mygen+1; gent[myent] = 0 };
	D;
	elock[myent] = 0; mystamp = 0;
	D
}

/* requeueDeferred (ring_pop.go): true (take retries) only when the
 * repair ran and requeued something (ActionRequeue or
 * ActionRequeueInPlace in its report). Until 2026-12-02 the model retried
 * whenever the repair was not busy: a repair that only deferred again (a
 * dead lease beside a poison in a full ring) made take retry forever,
 * which the code does not (it reports the ring empty). */
inline requeueDeferred() {
	if
	:: deferredW != 0 -> D; repair(false); got = (!busy && nreq > 0)
	:: else -> got = false
	fi;
	nreq = 0
}

/* ---------------------------------------------------------------- */
/* take (ring_pop.go): into state ns; res 0 taken (h at hd, word in ws..), 1 empty */
inline take(ns) {
	do
	:: hd = head; D;
		lap = hd / C; i = hd % C;
		LOAD(i, ws, wo, wl, wd); D;
		dd = wl - lap;
		if
		:: dd == 0 && ws == READY && wd >= LIMIT ->
			SCAS(i, READY, 0, lap, wd, POISONED, 0, lap, wd, ok);
#ifdef REACH_POISON
			if :: ok -> reachSetAside = true :: else -> skip fi;
#endif
			D;
			if :: ok -> CASB(head, hd, hd+1); D :: else -> skip fi
		:: dd == 0 && ws == READY && wd < LIMIT ->
			atomic {
				SCAS(i, READY, 0, lap, wd, ns, mystamp, lap, wd+1, ok);
				if
				:: ok -> assert(gown[i] == 0 || !alive[gown[i]-1]); gown[i] = me+1
				:: else -> skip
				fi
			}
			if
			:: ok -> wd++; res = 0; break
			:: else -> D
			fi
		:: dd == 0 && (ws == FREE || ws == WRITING) ->
			if
			:: head == hd ->
				requeueDeferred();
				if :: !got -> res = 1; break :: else -> skip fi
			:: else -> D
			fi
		:: (dd == 0 && ws >= READING) || dd == 1 || dd == 2 ->
			CASB(head, hd, hd+1); D
		:: dd == -1 && (ws == LEASED || ws == POISONED || ws == READING) ->
			if
			:: head == hd ->
				requeueDeferred();
				if :: !got -> res = 1; break :: else -> skip fi
			:: else -> D
			fi
		:: else ->
			assert(head != hd); D
		fi
	od
}

/* takeNext (ring_batch.go): position hd+1 for a batch; ok */
inline takeNext(ns) {
	lap = (hd+1) / C; i = (hd+1) % C;
	LOAD(i, ws, wo, wl, wd); D;
	if
	:: ws == READY && wl == lap && wd < LIMIT ->
		atomic {
			SCAS(i, READY, 0, lap, wd, ns, mystamp, lap, wd+1, ok);
			if :: ok -> assert(gown[i] == 0 || !alive[gown[i]-1]); gown[i] = me+1 :: else -> skip fi
		}
		D
	:: else -> ok = false
	fi
}

/* the copy out of slot j (held: state s0 at lap l0), checked complete */
inline copyOut(j, s0, l0) {
	atomic { MINE(j, s0, l0); x1 = d1[j] };
	D;
	atomic { MINE(j, s0, l0); x2 = d2[j] };
	assert(x1 == x2 && x1 >= 1 && x1 <= NMSG && !aborted[x1])
}

/* a message handed to a caller: again only if a holder died or released it */
#define DELIVER(x) atomic { assert(ndeliv[x] == 0 || mayRedeliver[x]); ndeliv[x]++ }

/* pop's release store (FREE one lap on), with the delivery */
#define POPFREE(j, l0, x) atomic { MINE(j, READING, l0); st[j] = FREE; ow[j] = 0; lp[j] = l0+1; dv[j] = 0; gown[j] = 0; DELIVER(x) }

/* ---------------------------------------------------------------- */
proctype producer0() {
	byte me = P0;
	LOCALS;
	attachTo(0);
	if
#ifndef BATCH
	:: /* two TryPush */
		push(1, C, 0);
		if :: res == 0 -> pushedRet[1] = true :: else -> skip fi;
#if M0 > 1
		push(2, C, 0);
		if :: res == 0 -> pushedRet[2] = true :: else -> skip fi
#endif
#else
	:: /* one TryPushBatch of both (pushRun: claimTail, then FREE->WRITING CASes) */
		claimTail();
		if
		:: res == 0 ->
			x1 = t; /* the run's first position */
			k = 1;
			lap = (t+1) / C; i = (t+1) % C;
			LOAD(i, ws, wo, wl, wd); D;
			if
			:: ws == FREE && wl == lap ->
				atomic {
					SCAS(i, FREE, 0, lap, 0, WRITING, mystamp, lap, 0, ok);
					if :: ok -> assert(gown[i] == 0 || !alive[gown[i]-1]); gown[i] = me+1; k = 2 :: else -> skip fi
				}
			:: else -> skip
			fi;
			D; /* crash: ring.push-batch.after-claims */
			/* advance(tail, t, t+k) */
			do
			:: hd = tail; D;
				if
				:: hd >= x1 && hd < x1+k ->
					atomic { if :: tail == hd -> tail = x1+k; ok = true :: else -> ok = false fi }; D;
					if :: ok -> break :: else -> skip fi
				:: else -> break
				fi
			od;
			D; /* crash: ring.push-batch.after-advance */
			x2 = 0;
			do
			:: x2 < k ->
				i = (x1+x2) % C; lap = (x1+x2) / C;
				atomic { MINE(i, WRITING, lap); d1[i] = 1+x2 }; D;
				atomic { MINE(i, WRITING, lap); d2[i] = 1+x2 }; D;
				atomic { MINE(i, WRITING, lap); st[i] = READY; ow[i] = 0; dv[i] = 0; gown[i] = 0 };
				D; /* crash: ring.push-batch.mid-publish */
				x2++
			:: else -> break
			od;
			D; /* crash: ring.push-batch.after-publish */
			pushedRet[1] = true;
			if
			:: k == 2 -> pushedRet[2] = true
			:: else -> /* the rest in a second run: TryPush of message 2 */
				push(2, C, 0);
				if :: res == 0 -> pushedRet[2] = true :: else -> skip fi
			fi
		:: else -> skip
		fi
#endif
	fi;
	detach();
	nfin++;
	goto end;
	DIE;
end:
	RESET
}

proctype producer1() {
	byte me = P1;
	LOCALS;
	attachTo(1);
	if
#ifndef LOAN
	:: push(NMSG, C, 0);
		if :: res == 0 -> pushedRet[NMSG] = true :: else -> skip fi
#else
	:: /* TryLoan, write, then Publish (a CAS) or Abort (a CAS to FREE one lap on) */
		claimTail();
		if
		:: res == 0 ->
			D; /* crash: ring.loan.after-claim */
			CASB(tail, t, t+1);
			D; /* crash: ring.loan.after-advance */
			atomic { MINE(i, WRITING, lap); d1[i] = NMSG }; D;
			atomic { MINE(i, WRITING, lap); d2[i] = NMSG }; D;
			if
			:: atomic { SCAS(i, WRITING, mystamp, lap, 0, READY, 0, lap, 0, ok); assert(ok); gown[i] = 0 };
				D; /* crash: ring.publish.after-ready */
				pushedRet[NMSG] = true
			:: atomic { aborted[NMSG] = true; SCAS(i, WRITING, mystamp, lap, 0, FREE, 0, lap+1, 0, ok); assert(ok); gown[i] = 0 };
				D /* crash: ring.abort.after-free */
			fi
		:: else -> skip
		fi
#endif
	fi;
	detach();
	nfin++;
	goto end;
	DIE;
end:
	RESET
}

proctype popper() {
	byte me = POPPER;
	LOCALS;
	attachTo(2);
	k = 0;
	do
	:: k < POPS ->
		if
#ifndef POPBATCH
		:: /* TryPop */
			take(READING);
			if
			:: res == 0 ->
				D; /* crash: ring.pop.after-take */
				CASB(head, hd, hd+1);
				D; /* crash: ring.pop.after-advance */
				copyOut(i, READING, lap);
				D; /* crash: ring.pop.after-copy */
				POPFREE(i, lap, x1);
				D
			:: else ->
				/* blocked (Pop): the wait heals the ring when the slot at
				 * the head is owned by a proven-dead process (healSlot) */
				hd = head; D;
				i = hd % C;
				LOAD(i, ws, wo, wl, wd); D;
				if
				:: (ws == WRITING || ws == READING) && wo != 0 ->
					e = wo - 1;
					atomic { s = est[e]; g = egen[e] }; D;
					judge(e, s, dead); D;
					if :: dead -> repair(false) :: else -> skip fi
				:: else -> skip
				fi
			fi
#else
		:: /* TryPopBatch of 2: take, takeNext, advance, copies, frees */
			take(READING);
			if
			:: res == 0 ->
				t = hd; x1 = i; got = 1;  /* first position t, slot x1 */
				takeNext(READING);
				if :: ok -> got = 2 :: else -> skip fi;
				D; /* crash: ring.pop-batch.after-take */
				do
				:: hd = head; D;
					if
					:: hd >= t && hd < t+got ->
						atomic { if :: head == hd -> head = t+got; ok = true :: else -> ok = false fi }; D;
						if :: ok -> break :: else -> skip fi
					:: else -> break
					fi
				od;
				D; /* crash: ring.pop-batch.after-advance */
				i = x1; lap = t / C;
				copyOut(i, READING, lap);
				if
				:: got == 2 ->
					rwd = x1; /* first payload */
					i = (t+1) % C; lap = (t+1) / C;
					copyOut(i, READING, lap);
					rwl = x1; x1 = rwd  /* second payload in rwl */
				:: else -> skip
				fi;
				D; /* crash: ring.pop-batch.after-copy */
				i = t % C; lap = t / C;
				POPFREE(i, lap, x1);
				if
				:: got == 2 ->
					D; /* crash: ring.pop-batch.mid-free */
					i = (t+1) % C; lap = (t+1) / C;
					POPFREE(i, lap, rwl)
				:: else -> skip
				fi;
				D
			:: else -> skip
			fi
#endif
		fi;
		RESET;
		k++
	:: else -> break
	od;
	detach();
	nfin++;
	goto end;
	DIE;
end:
	RESET
}

/* Ack of the lease in slot rj: CAS from the word as it is now (burns
 * move its lap) */
inline ackLease() {
	do
	:: LOAD(rj, rws, rwo, rwl, rwd); D;
		assert(rws == LEASED && rwo == mystamp);
		D; /* crash: ring.ack.before-free */
		atomic {
			SCAS(rj, LEASED, mystamp, rwl, rwd, FREE, 0, rwl+1, 0, ok);
			if :: ok -> gown[rj] = 0 :: else -> skip fi
		}
		D;
		if :: ok -> break :: else -> skip fi
	od
}

/* Lease.Data of slot rj: the payload, zero-copy, delivered */
inline leaseData() {
	atomic { x1 = d1[rj] }; D; atomic { x2 = d2[rj] };
	assert(x1 == x2 && x1 >= 1 && x1 <= NMSG && !aborted[x1]);
	DELIVER(x1)
}

proctype claimer() {
	byte me = CLAIMER;
	LOCALS;
	attachTo(3);
#ifdef CLAIMBATCH
	/* TryClaimBatch of 2 (claimRun: take, takeNext, one advance of the
	 * head), then AckBatch (a loop of Ack) */
	take(LEASED);
	if
	:: res == 0 ->
		t = hd; rj = i; got = 1;
		takeNext(LEASED);
		if :: ok -> got = 2; s = i :: else -> skip fi;
		D; /* crash: ring.claim-batch.after-take */
		do
		:: hd = head; D;
			if
			:: hd >= t && hd < t+got ->
				atomic { if :: head == hd -> head = t+got; ok = true :: else -> ok = false fi }; D;
				if :: ok -> break :: else -> skip fi
			:: else -> break
			fi
		od;
		D; /* crash: ring.claim-batch.after-advance */
		leaseData();
		if :: got == 2 -> e = rj; rj = s; leaseData(); rj = e :: else -> skip fi;
		D; /* test.lease.processing */
		ackLease();
		if
		:: got == 2 ->
			D; /* crash: ring.ack-batch.mid-free */
			rj = s; ackLease()
		:: else -> skip
		fi
	:: else -> skip
	fi;
#else
	take(LEASED);
	if
	:: res == 0 ->
		D; /* crash: ring.claim.after-take */
		CASB(head, hd, hd+1);
		D; /* crash: ring.claim.after-advance */
		rj = i;
		/* Lease.Data: the payload, zero-copy */
		atomic { x1 = d1[rj] }; D; atomic { x2 = d2[rj] };
		assert(x1 == x2 && x1 >= 1 && x1 <= NMSG && !aborted[x1]);
		DELIVER(x1);
		D; /* test.lease.processing */
		if
		:: /* Ack: CAS from the word as it is now (burns move its lap) */
			do
			:: LOAD(rj, rws, rwo, rwl, rwd); D;
				assert(rws == LEASED && rwo == mystamp);
				D; /* ring.ack.before-free */
				atomic {
					SCAS(rj, LEASED, mystamp, rwl, rwd, FREE, 0, rwl+1, 0, ok);
					if :: ok -> gown[rj] = 0 :: else -> skip fi
				}
				D;
				if :: ok -> break :: else -> skip fi
			od
		:: /* Release: recoverSlot as this very handle */
			mayRedeliver[x1] = true;
			LOAD(rj, rws, rwo, rwl, rwd); D;
			assert(rws == LEASED && rwo == mystamp);
			recoverSlot();
			assert(rwhat != NOTHING);
			if
			:: rwhat == DEFERRED -> /* ErrFull: the lease is still held; Ack it */
				do
				:: LOAD(rj, rws, rwo, rwl, rwd); D;
					assert(rws == LEASED && rwo == mystamp);
					atomic {
						SCAS(rj, LEASED, mystamp, rwl, rwd, FREE, 0, rwl+1, 0, ok);
						if :: ok -> gown[rj] = 0 :: else -> skip fi
					}
					D;
					if :: ok -> break :: else -> skip fi
				od
			:: else -> skip
			fi
		fi
	:: else -> skip
	fi;
#endif
	detach();
	nfin++;
	goto end;
	DIE;
end:
	RESET
}

proctype repairer() {
	byte me = REPAIRER;
	LOCALS;
	myent = 255; mystamp = 0;
	asRepairer(false);
	nfin++;
	goto end;
	DIE;
end:
	RESET
}

/* After every worker ended (returned or died): attach (repairing as the
 * repairer when no entry is free), Repair, then drain until empty. Every
 * message whose push returned must have been delivered by then. */
proctype drainer() {
	byte me = DRAINER;
	LOCALS;
	mortal = false;
	myent = 255; mystamp = 0;
	nfin == NWORK;
	/* Attach: a free entry, else recover (repair as the repairer, parking) */
	do
	:: e = 0; got = false;
		do
		:: e < NP ->
			if
			:: est[e] == EFREE && elock[e] == 0 -> got = true; break
			:: else -> e++
			fi
		:: else -> break
		od;
		if
		:: got -> break
		:: else -> asRepairer(true); myent = 255; mystamp = 0
		fi
	od;
	atomic { elock[e] = me+1; g = egen[e]; est[e] = EACTIVE; gent[e] = me+1 };
	myent = e; mystamp = e+1; mygen = g;
	inherited = false;
	repair(false);
	assert(!busy);
	/* drain to empty, then TakePoisoned one poison at a time (its slot
	 * freed one lap on), then drain again: a poison takes a slot, and a
	 * dead holder's message deferred for want of room is requeued by the
	 * first take after TakePoisoned made room (requeueDeferred) */
	do
	:: take(READING);
		if
		:: res == 0 ->
			CASB(head, hd, hd+1);
			copyOut(i, READING, lap);
			POPFREE(i, lap, x1)
		:: else ->
			/* TakePoisoned (ring_poison.go): the first poisoned slot, CAS to FREE one lap on */
			i = 0; got = false;
			do
			:: i < C ->
				LOAD(i, ws, wo, wl, wd);
				if
				:: ws == POISONED ->
					atomic { x1 = d1[i]; x2 = d2[i]; assert(x1 == x2 && x1 >= 1 && x1 <= NMSG && !aborted[x1]) };
					SCAS(i, POISONED, wo, wl, wd, FREE, 0, wl+1, 0, ok);
					assert(ok);
					poisonTaken[x1] = true; got = true;
#ifdef REACH_POISON
					reachTaken = true;
#endif
					break
				:: else -> i++
				fi
			:: else -> break
			od;
			if :: !got -> break :: else -> skip fi
		fi
	od;
	/* nothing is left in the ring: no message of a dead holder left
	 * deferred, no poison, no half-written slot */
	i = 0;
	do
	:: i < C -> assert(st[i] == FREE); i++
	:: else -> break
	od;
	k = 1;
	do
	:: k <= NMSG ->
		assert(!pushedRet[k] || ndeliv[k] > 0 || poisonTaken[k]);
		k++
	:: else -> break
	od;
#ifdef REACH_POISON
	assert(!(reachSetAside && reachBurn && reachTaken));
#endif
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
		run producer0();
#ifdef WITH_P1
		run producer1();
#else
		nfin++;
#endif
#ifdef WITH_POPPER
		run popper();
#else
		nfin++;
#endif
#ifdef WITH_CLAIMER
		run claimer();
#else
		nfin++;
#endif
#ifdef WITH_REPAIRER
		run repairer();
#else
		nfin++;
#endif
		run drainer()
	}
}

/* Fair runs end with the drainer's check done (spin -f: weak fairness). */
ltl delivered { <> finished }
