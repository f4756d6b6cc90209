// The Node API of ctxkernel. Envelope types are generated from wit/schemas.
import type {
  AppendEventsRequest,
  AppendEventsResponse,
  CompactContextRequest,
  CompactContextResponse,
  ContextPlan,
  ConsolidateMemoryRequest,
  ConsolidateMemoryResponse,
  ContinueOperationRequest,
  DecideMemoryRequest,
  DeleteMemoryRequest,
  DeletionReceipt,
  GetContentRequest,
  ImportMessagesRequest,
  ImportMessagesResponse,
  InfoResponse,
  MemoryReceipt,
  PlanContextRequest,
  ProposeMemoryRequest,
  ProposeMemoryResponse,
  ProviderRequest,
  PurgeMemoryRequest,
  PurgeMemoryResponse,
  PutContentRequest,
  PutContentResponse,
  ReadEventsRequest,
  ReadEventsResponse,
  ReadKernelEventsRequest,
  ReadKernelEventsResponse,
  ReadMemoryRequest,
  ReadMemoryResponse,
  RecallMemoryRequest,
  RecallMemoryResponse,
  ReconcileRequest,
  RenderContextRequest,
  RenderContextResponse,
  ResidentSnapshotRequest,
  ResidentSnapshotResponse,
  Usage,
  ValidateRequestRequest,
  ValidateRequestResponse,
  VerifyStoreRequest,
  VerifyStoreResponse,
} from '../types/envelopes.js';

export * from '../types/envelopes.js';
export * as items from './items.js';
export type { ItemOptions } from './items.js';

export type ErrorCode =
  | 'invalid-request'
  | 'unsupported-schema'
  | 'context-over-budget'
  | 'degraded'
  | 'stale'
  | 'reconciliation-required'
  | 'content-unavailable'
  | 'digest-mismatch'
  | 'scope-denied'
  | 'partial'
  | 'not-found'
  | 'conflict'
  | 'illegal-transition'
  | 'limit-exceeded'
  | 'storage-failure'
  | 'internal';

/**
 * JSON numbers in values parsed from the kernel (responses, error details):
 * an integer beyond 2^53 − 1 comes back as a `bigint`, never rounded. The
 * kernel's contract keeps every integer within ±(2^53 − 1), so in practice
 * only an error detail that echoes a request can hold one.
 */
export function parseJson(text: string): any;
/** JSON text for a request object without loss: a `bigint` is written as an integer. */
export function stringifyJson(value: unknown): string;

/** The one error every command raises; its message does not repeat its code. */
export class KernelError extends Error {
  readonly code: ErrorCode;
  /** The kernel's detail, parsed with `parseJson`. */
  readonly detail: Record<string, unknown>;
  /** The kernel's detail text, byte for byte. */
  readonly detailJson: string;
  constructor(code: ErrorCode, message: string, detailJson?: string, options?: ErrorOptions);
}

/** Throw from a provider callback when nobody knows whether the call happened. */
export class ProviderOutcomeUnknown extends Error {}

export interface Entry {
  key: string;
  revision: bigint;
  value: Uint8Array;
}

/**
 * The storage port. Keys are ASCII; `scan` returns keys after `startAfter`
 * that start with `prefix`, in bytewise order: `limit` of them, or fewer only
 * when no more follow (the kernel reads a short page as the end). `put`/`remove` compare the
 * key's revision with `expected` (undefined: unconditional, 0n: absent) and
 * throw `StoreConflict` on a mismatch; expected failures throw `StoreError`.
 * `begin(write)` opens a call's transaction; `write` is false for a command
 * that only reads.
 */
export interface Store {
  get(key: string): Entry | undefined;
  scan(prefix: string, startAfter: string, limit: number): Entry[];
  put(key: string, value: Uint8Array, expected: bigint | undefined): bigint;
  remove(key: string, expected: bigint | undefined): void;
  begin(write?: boolean): void;
  commit(): void;
  rollback(): void;
}

export class StoreConflict extends Error {
  readonly current: bigint;
  constructor(current: bigint | number);
}
export class StoreError extends Error {}

export class MemoryStore implements Store {
  get(key: string): Entry | undefined;
  scan(prefix: string, startAfter: string, limit: number): Entry[];
  put(key: string, value: Uint8Array, expected: bigint | undefined): bigint;
  remove(key: string, expected: bigint | undefined): void;
  begin(): void;
  commit(): void;
  rollback(): void;
  entries(): Entry[];
}

/** A better-sqlite3 `Database`, or any binding with its synchronous API. */
export interface SqliteDatabase {
  pragma(source: string, options?: { simple?: boolean }): unknown;
  prepare(source: string): unknown;
  exec(source: string): unknown;
  readonly inTransaction: boolean;
  close(): void;
}

export interface SqliteStoreOptions {
  /** How long a command that writes waits for another connection's write lock (default 5000). */
  busyTimeoutMs?: number;
}

/**
 * A command that writes takes the write lock when it begins, waiting up to
 * `busyTimeoutMs` before `storage-failure`; one that only reads takes none.
 */
export class SqliteStore implements Store {
  static open(path: string, options?: SqliteStoreOptions): Promise<SqliteStore>;
  constructor(db: SqliteDatabase, options?: SqliteStoreOptions);
  readonly database: SqliteDatabase;
  get(key: string): Entry | undefined;
  scan(prefix: string, startAfter: string, limit: number): Entry[];
  put(key: string, value: Uint8Array, expected: bigint | undefined): bigint;
  remove(key: string, expected: bigint | undefined): void;
  begin(write?: boolean): void;
  commit(): void;
  rollback(): void;
  close(): void;
}

export type Command =
  | 'info'
  | 'plan-context'
  | 'append-events'
  | 'read-events'
  | 'compact-context'
  | 'continue-operation'
  | 'reconcile'
  | 'read-kernel-events'
  | 'propose-memory'
  | 'consolidate-memory'
  | 'decide-memory'
  | 'delete-memory'
  | 'purge-memory'
  | 'read-memory'
  | 'recall-memory'
  | 'resident-snapshot'
  | 'import-messages'
  | 'render-context'
  | 'validate-request'
  | 'verify-store';
export const COMMANDS: readonly Command[];

/** The sha256 of the one component this package runs (as `sha256sum build/ctxkernel.wasm` prints it). */
export const COMPONENT_SHA256: string;

/** What the `ctxkernel:command` diagnostics channel publishes for each command. */
export interface CommandEvent {
  command: Command | 'put-content' | 'get-content';
  /** `ok`, or the error's code (`internal` for a host exception). */
  outcome: 'ok' | ErrorCode;
  durationMs: number;
}

/** What a provider callback answers. */
export interface ProviderAnswer {
  text: string;
  usage: Usage;
}
export type Provider = (request: ProviderRequest) => Promise<ProviderAnswer>;

export interface KernelOptions {
  /** Gives `now` to requests that leave it out: RFC 3339 text (default: the host clock). */
  clock?: () => string;
}

/**
 * The typed methods fill what a request leaves out: `schemaVersion`, and
 * `now` from the kernel's clock (in the plan a render request carries too).
 * Each command is published on the `ctxkernel:command` diagnostics channel
 * as a `CommandEvent`.
 */
export class Kernel {
  constructor(store?: Store, options?: KernelOptions);
  readonly store: Store;
  readonly clock: () => string;
  /**
   * Any JSON command, or `put-content` with its bytes; returns the kernel's
   * canonical JSON text verbatim. A string request is sent as given; an
   * object is written with `stringifyJson`. The typed methods below parse
   * the answer with `parseJson`.
   */
  call(command: Command, request: string | object): string;
  call(command: 'put-content', request: string | PutContentRequest, bytes: Uint8Array): string;
  info(): InfoResponse;
  planContext(request: PlanContextRequest): ContextPlan;
  appendEvents(request: AppendEventsRequest): AppendEventsResponse;
  readEvents(request: ReadEventsRequest): ReadEventsResponse;
  compactContext(request: CompactContextRequest): CompactContextResponse;
  /** Answers an `awaiting-provider` operation: a compaction, or an extraction (`ext-…`). */
  continueOperation(request: ContinueOperationRequest): CompactContextResponse | ConsolidateMemoryResponse;
  /** Settles an operation: a compaction (its receipt) or a deletion's replicas (`del-…`, its receipt). */
  reconcile(request: ReconcileRequest): CompactContextResponse | DeletionReceipt;
  readKernelEvents(request?: ReadKernelEventsRequest): ReadKernelEventsResponse;
  proposeMemory(request: ProposeMemoryRequest): ProposeMemoryResponse;
  consolidateMemory(request: ConsolidateMemoryRequest): ConsolidateMemoryResponse;
  decideMemory(request: DecideMemoryRequest): MemoryReceipt;
  deleteMemory(request: DeleteMemoryRequest): DeletionReceipt;
  purgeMemory(request: PurgeMemoryRequest): PurgeMemoryResponse;
  readMemory(request: ReadMemoryRequest): ReadMemoryResponse;
  recallMemory(request: RecallMemoryRequest): RecallMemoryResponse;
  residentSnapshot(request: ResidentSnapshotRequest): ResidentSnapshotResponse;
  /** Appends what the session does not hold yet of a provider transcript; importing it again appends nothing. */
  importMessages(request: ImportMessagesRequest): ImportMessagesResponse;
  /**
   * Plans as `planContext` does and renders the kept context as a request
   * body in `format`; `bodyJson` is the body's exact text, to send as it is.
   */
  renderContext(request: RenderContextRequest): RenderContextResponse;
  validateRequest(request: ValidateRequestRequest): ValidateRequestResponse;
  /** Reads every memory entry against its record and names each problem by key; changes nothing. */
  verifyStore(request?: VerifyStoreRequest): VerifyStoreResponse;
  putContent(request: string | PutContentRequest, bytes: Uint8Array): PutContentResponse;
  getContent(request: string | GetContentRequest): Uint8Array;
  /**
   * Compacts, awaiting `provider` whenever the kernel asks for a summary. An
   * answer of another shape is a `KernelError` (`invalid-request`, its
   * detail naming the `field` and the `operationId` still awaiting).
   */
  compact(request: CompactContextRequest, provider?: Provider): Promise<CompactContextResponse>;
  /** Extracts candidate memories, awaiting `provider` when the kernel asks for an extraction. */
  consolidate(request: ConsolidateMemoryRequest, provider?: Provider): Promise<ConsolidateMemoryResponse>;
}
