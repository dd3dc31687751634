# TowerPS wire protocol: the header frame of every message.
#
# A message on the wire is a ZeroMQ multipart message:
#   [routing id, ROUTER side only] [header] [payload 0] ... [payload n-1]
# The header is this schema's Header, as an unpacked Cap'n Proto flat array. Tensor bytes never
# enter Cap'n Proto: payload i is raw little-endian data described by Header.tensors[i].
# Adding fields is backwards compatible; never renumber or reuse an ordinal.
@0xb14e0c88fcd901a7;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("towerps::proto");

enum MessageType {
  invalid @0;          # never sent; the zero value catches uninitialised headers
  ping @1;
  pong @2;
  register @3;         # worker -> server: declares variables, fingerprints
  registerReply @4;
  init @5;             # chief -> server: initial values
  initReply @6;
  push @7;             # worker -> server: gradients computed from Header.version
  pushReply @8;
  pull @9;             # worker -> server: wants chunks at Header.version or later
  pullReply @10;
  stats @11;
  statsReply @12;
  error @13;           # reply carrying only a status
  shutdown @14;
  # Replication (--ps-replicas 2; ps/server/replica_state.h, ps/server/shard.h). Server to
  # server, on the primary's link to the backup, in the order the primary applies them: the init,
  # each sync step's sum of gradients or each async/SSP push, and the whole state of a chunk when
  # a backup (re)joins.
  replicate @15;
  replicateReply @16;  # the backup's chunk version after applying it
  join @17;            # a restarted server -> its peer: send me the state of the chunks we share
  joinReply @18;       # carries the model (variables, signature); the states follow as replicates
  takeOver @19;        # worker -> backup: Header.failedServer is gone; become the primary. Then
                       # backup -> failedServer: you were replaced (Header.replacedIncarnation)
  takeOverReply @20;
  leave @21;           # worker -> server: this worker is done (--shutdown-servers); a chief's
                       # shutdown waits for every worker's (ps/server/shutdown_gate.h).
                       # Answered: pong
  bundle @22;          # several requests to one server, or their replies, in one message:
                       # Header.parts (each a whole header, with its own requestId) and the
                       # payloads of part 0, then part 1, ... (ps/client/client_impl.h)
}

enum Role {
  unknown @0;
  server @1;
  worker @2;
  launcher @3;
  tool @4;             # benchmarks, tests, admin clients
}

enum DType {
  float32 @0;
  uint8 @1;
  uint64 @2;   # a table's row ids
  uint32 @3;   # a table's per-row update counts
}

# Mirrors towerps::StatusCode.
enum StatusCode {
  ok @0;
  invalidArgument @1;
  notFound @2;
  ioError @3;
  network @4;
  timeout @5;
  protocol @6;
  corruption @7;
  failedPrecondition @8;
  resourceExhausted @9;
  cancelled @10;
  internal @11;
}

# Describes one payload frame.
struct TensorMeta {
  variableId @0 :UInt32;
  chunkId @1 :UInt32;
  shape @2 :List(Int64);
  dtype @3 :DType;
  payloadBytes @4 :UInt64;   # must equal the frame size and prod(shape) * sizeof(dtype)
  # Non-zero: the payload has no frame; it lies in the sender's shared-memory arena (Header.shm)
  # at `shmOffset`, lent under this id until the receiver releases it (ShmInfo.released).
  shmRef @5 :UInt64;
  shmOffset @6 :UInt64;
}

# Shared memory between processes on one host (common/shm_arena.h, docs/ARCHITECTURE.md). Every
# message between processes that allow it carries the sender's offer; payloads travel through the
# arena only once the receiver has said, in `mapped`, that it mapped the sender's arena.
struct ShmInfo {
  host @0 :Text;       # the sender's host identity: boot id, hostname, network and PID namespaces
  pid @1 :UInt32;      # the sender's arena: /proc/<pid>/fd/<fd>, read-only for peers
  fd @2 :Int32;
  nonce @3 :UInt64;    # random, also written in the arena's first page; names this arena
  bytes @4 :UInt64;
  mapped @5 :UInt64;   # the nonce of the receiver's arena that the sender has mapped; 0: none
  released @6 :List(UInt64);  # refs into the receiver's arena (nonce `mapped`) dropped here
}

struct VariableSpec {
  name @0 :Text;
  shape @1 :List(Int64);
  dtype @2 :DType;
  kind @3 :UInt8;      # ps::VariableKind: 0 trainable, 1 moving average (batch norm statistics),
                       # 2 an embedding table: shape [rows (0: unbounded), dim]
  decay @4 :Float32;   # moving average: value = decay * value + (1 - decay) * pushed statistic
  initScale @5 :Float32;  # table: rows start uniform in [-initScale, initScale)
  policy @6 :Text;        # table: its declared admission and eviction, "KEY=VALUE,..."
  segments @7 :List(TableSegment);  # table: the bounded tables it joins (job/variable.h)
}

struct TableSegment {
  name @0 :Text;
  rows @1 :Int64;
}

struct Header {
  type @0 :MessageType;
  senderRole @1 :Role;
  senderRank @2 :UInt32;
  jobId @3 :UInt64;
  requestId @4 :UInt64;       # echoed in the reply

  # A chunk version: the number of updates applied to the chunk since its initial value (in sync
  # mode, the step). Its meaning depends on the message type:
  #   push           the version the gradient was computed from (its base version; in sync mode
  #                  the step it belongs to)
  #   pull           the minimum version wanted: the reply waits until the chunk reaches it
  #   initReply, pushReply, pullReply
  #                  the chunk's version after the request (pullReply: of the returned values)
  #   registerReply  the lowest chunk version this server restored from its checkpoint, or -1
  #   other types    unused (0)
  # -1 means "no version": a chunk that has no initial value yet, or, in registerReply, a server
  # that restored nothing (a fresh job, whose chief must init every variable). In C++ it is
  # towerps::ps::kNoVersion (job/version.h). Named `step` before; same ordinal, same wire.
  version @5 :Int64;
  tensors @6 :List(TensorMeta);
  statusCode @7 :StatusCode;
  statusMessage @8 :Text;

  # register: what the worker declares; the server compares them with its own.
  variables @9 :List(VariableSpec);
  configFingerprint @10 :UInt64;
  modelSignature @11 :UInt64;
  configFields @12 :List(ConfigField);   # name=value pairs, to name the differing field

  # push/pull/init address one chunk: (variableId, chunkId). Push and init also carry it in
  # tensors[0]; a pull has no payload, so it is named here.
  variableId @13 :UInt32;
  chunkId @14 :UInt32;
  # push: the worker's iteration (SSP clock) this gradient belongs to; pull: the iteration the
  # worker is about to compute; pullReply: the requesting worker's clock at this chunk, the
  # number of its iterations applied there (where a restarted worker resumes). `version` stays
  # the parameter version (see above).
  clock @15 :Int64;
  # statsReply
  stats @16 :ServerStats;
  # pushReply: staleness of the applied update (async/SSP), or -1 when dropped as stale.
  staleness @17 :Int64;
  # pull: wants the chunk at exactly `version`, not later (a restarted sync worker recomputing
  # the step its predecessor did not finish; the server keeps one version back). Waits while the
  # chunk is below `version`; an error when the server no longer holds it.
  exactVersion @18 :Bool;
  # Every reply from a server: a random number the server drew when it started. A different one
  # from the same server means it was restarted (and restored from its checkpoint): the client
  # fails what it had outstanding there, and the worker rejoins where the server now stands.
  serverIncarnation @19 :UInt64;
  # push (sync): the worker rejoined a job whose servers disagree on the step (one came back from
  # its checkpoint), so it cannot repeat its earlier pushes bit for bit: a gradient of it still
  # pending for this step is replaced, not compared.
  replacesPending @20 :Bool;

  # replicate: what the primary forwards. `forWorker` is the worker whose push it repeats.
  replicaOp @21 :ReplicaOp;
  forWorker @22 :Int32;
  replicaState @23 :ReplicaState;   # replicaOp = state
  # registerReply: the replica groups (ranks of the chunks' home servers) this server is the
  # primary of now; a worker routes each group to the server that claims it.
  primaryGroups @24 :List(UInt32);
  # takeOver: the server that stopped answering.
  failedServer @25 :Int32;
  # replicate (step): how many gradients the forwarded sum adds up.
  stepGradients @26 :Int32;
  # takeOver from a server to the one it replaced: the incarnation replaced. A process with that
  # incarnation (alive after all: it was hung) stops and rejoins as the backup; a restarted one
  # (another incarnation) ignores it.
  replacedIncarnation @27 :UInt64;
  # takeOver from a worker: failedServer stopped answering (it may be hung, not dead: the new
  # primary tells it it was replaced). False: it answered that it is not the primary.
  unresponsive @28 :Bool;
  # Any message, when sender and receiver allow shared memory (--transport auto|shm).
  shm @29 :ShmInfo;
  # push: then pull, in the same round trip (half the messages of a push and a pull). The reply
  # is a pullReply, sent once the chunk can serve a pull for at least `pullVersion` at
  # `pullClock` (as a pull's `version` and `clock`), and it answers the push too: `staleness`
  # as a pushReply's, and `pushRefusal` when the gradient was refused for a NaN or an infinity
  # (why; empty when it was taken). A push the server cannot take at all gets an error reply,
  # as a plain push does, and no values.
  thenPull @30 :Bool;
  pullVersion @31 :Int64;
  pullClock @32 :Int64;
  pushRefusal @33 :Text;
  # pull of a table partition: every row it holds, whatever the ids (none are sent); the reply
  # carries their ids as a third tensor (an export of the table).
  everyRow @34 :Bool;
  # bundle: each part a flat Cap'n Proto Header of its own, a push or a pull (a reply: its
  # reply), whose `tensors` describe the next of the bundle's payloads, in order; `tensors` here
  # describes them all. Parts are answered each by its own reply, and a bundle's replies travel as
  # one bundle once every part has one.
  parts @35 :List(Data);
  # push: the sender read every value of the gradient and found it finite (ps::Client checks it
  # as it sends, where the values were just written, unless its caller checked them already), so
  # the server does not read it again. False: the server looks for a NaN or an infinity itself
  # and refuses the gradient if it finds one (a sender that sends a non-finite gradient says so).
  finite @36 :Bool;
  # Every request from a worker: the serverIncarnation of the last reply it had from this server
  # (0: none yet). A server refuses, unread, a request addressed to another incarnation: one
  # queued across its restart, written for the process it replaced (an async push whose
  # iteration is ahead of what the restored server holds would skip the iterations between). The
  # refusal carries the new incarnation, so the worker learns of the restart and rejoins.
  toIncarnation @37 :UInt64;
}

enum ReplicaOp {
  none @0;
  init @1;    # tensors[0]: the initial values
  push @2;    # async/SSP: tensors[0] is forWorker's gradient; version, clock and
              # replacesPending as its push
  state @3;   # replicaState and its tensors: the chunk as the primary holds it now
  step @4;    # sync: step `version` completed; tensors[0] is the rank-ordered sum of its
              # `stepGradients` finite gradients (no tensor when there were none)
}

# A chunk's whole state, for a joining backup. Tensors, in order: values, the optimizer slots,
# the previous version's values (when previousVersion >= 0), and one gradient per pending
# worker whose push was not refused.
struct ReplicaState {
  version @0 :Int64;
  updates @1 :Int64;
  previousVersion @2 :Int64;
  workerClocks @3 :List(Int64);
  slots @4 :UInt32;
  pendingStep @5 :Int64;             # sync: the step the pending gradients belong to
  pendingWorkers @6 :List(Int32);    # in rank order
  pendingRefused @7 :List(Bool);     # per pending worker: refused as non-finite (no tensor)
}

# One table's counters on a server, over its partitions there (job/stats_report.h).
struct TableStats {
  name @0 :Text;
  rows @1 :UInt64;
  rowsAdmitted @2 :UInt64;
  idsPending @3 :UInt64;
  gradientsDropped @4 :UInt64;
  evictedTtl @5 :UInt64;
  evictedCapacity @6 :UInt64;
  rowsOnDisk @7 :UInt64;
  rowReads @8 :UInt64;
  diskReads @9 :UInt64;
  diskHits @10 :UInt64;
  diskWrites @11 :UInt64;
}

struct ServerStats {
  bytesIn @0 :UInt64;
  bytesOut @1 :UInt64;
  gradientsReceived @2 :UInt64;
  updatesApplied @3 :UInt64;
  staleDropped @4 :UInt64;
  stalenessHistogram @5 :List(UInt64);   # bucket i counts updates of staleness i; last: >= len-1
  aggregationNanos @6 :UInt64;
  pullsServed @7 :UInt64;
  rejectedMessages @8 :UInt64;
  minVersion @9 :Int64;    # lowest chunk version; -1 while a chunk has no value or none is held
  maxVersion @10 :Int64;   # highest chunk version; -1 while no chunk has a value
  checkpointsWritten @11 :UInt64;
  nonfiniteRejected @12 :UInt64;  # gradients refused for a NaN or an infinity, never applied
  refusedHandshakes @13 :UInt64;   # connections refused for not holding the job's secret
  refusedShutdowns @14 :UInt64;    # shutdown requests from a peer other than the chief or launcher
  # Tables: rows held, and each applied row's updates between its pull and its push (bucket i
  # counts staleness i; last: >= len-1).
  tableRows @15 :UInt64;
  rowStalenessHistogram @16 :List(UInt64);
  # The earliest non-finite gradient refused, by its worker's step (iteration + 1), then rank:
  # the first worker whose training diverged. -1 when none was.
  firstNonfiniteWorker @17 :Int32 = -1;
  firstNonfiniteStep @18 :Int64 = -1;
  # The staleness of every update applied, summed, and the largest: exact where the histogram
  # clamps (its last bucket).
  stalenessSum @19 :UInt64;
  stalenessMax @20 :UInt64;
  # Wall-clock time in which at least one of the server's threads was applying an update
  # (aggregationNanos sums the threads' times).
  updateWallNanos @21 :UInt64;
  # The ranks of the workers that have registered with this server since it started: a sync
  # job's workers wait until every one has (worker/train/join_job.h).
  registeredWorkers @22 :List(UInt32);
  # Wall-clock time since this server's first update (0 before it): the job's training time as
  # this server saw it, which a restarted chief's summary reports (python/session.h).
  sinceFirstUpdateNanos @23 :UInt64;
  # Messages received and sent on the workers' socket (a bundle is one).
  messagesIn @24 :UInt64;
  messagesOut @25 :UInt64;
  # Tables' policies (ps/server/row_policy.h), over the server's partitions: ids given a row
  # after waiting, ids pending admission now, gradients dropped (an id not admitted, once per
  # update), and rows evicted by TTL and by capacity.
  tableRowsAdmitted @26 :UInt64;
  tableIdsPending @27 :UInt64;
  tableGradientsDropped @28 :UInt64;
  tableEvictedTtl @29 :UInt64;
  tableEvictedCapacity @30 :UInt64;
  # Tables on disk (ps/server/table_rows.h): rows on disk now, rows a lookup or update asked of
  # a tiered partition, of those the ones the disk was asked for and found, rows written to it.
  tableRowsOnDisk @31 :UInt64;
  tableRowReads @32 :UInt64;
  tableDiskReads @33 :UInt64;
  tableDiskHits @34 :UInt64;
  tableDiskWrites @35 :UInt64;
  tables @36 :List(TableStats);  # each table's part of the table* counters above
  # Gradients whose every value the server read for a NaN or an infinity, because their sender
  # had not checked them (Header.finite false: refused if it finds one).
  finiteChecks @37 :UInt64;
}

struct ConfigField {
  name @0 :Text;
  value @1 :Text;
}
