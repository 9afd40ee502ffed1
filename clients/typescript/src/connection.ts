/**
 * One connection to a node: TCP or TLS, the handshake (Hello, Welcome or Welcome3, Features on
 * version 4), framing both ways, `Pong` for every `Ping`, and liveness (a node silent for
 * longer than its pings allow is lost). Frames go to `onFrame`; the end, with its cause, to
 * `onClose` once. Worker and producer both build on it.
 */
import * as net from "node:net";
import * as tls from "node:tls";
import { DecodeError, LintelError, NodeError, RefusedError, ConnectionLostError, UnknownVariantError } from "./errors.js";
import { type Frame, FrameReader, decodeBody, encodeFrame } from "./codec/framing.js";
import type { Dialect } from "./codec/schema.js";
import { PROTOCOL_VERSION } from "./codec/frames.js";
import type { U64 } from "./codec/bytes.js";

/** TLS settings: what `node:tls` takes. `ca` to trust the node's certificate; `cert`/`key` for mutual TLS. */
export interface TlsOptions {
  ca?: string | Buffer | (string | Buffer)[];
  cert?: string | Buffer;
  key?: string | Buffer;
  /** The name the node's certificate must carry; default: the address's host. */
  servername?: string;
  /** Default true. */
  rejectUnauthorized?: boolean;
}

export interface ConnectOptions {
  /** `host:port`. */
  address: string;
  role: "Worker" | "Producer";
  /** Shown in the node's logs and status. */
  name: string;
  authToken?: string;
  tls?: TlsOptions;
  /** Version-4 features this side understands, sent in `Features`. */
  features: readonly string[];
  /** Default 5000 ms. */
  handshakeTimeoutMs?: number;
}

export interface Limits {
  max_frame_len: number;
  max_in_flight: number;
  ping_interval_ms: number;
  max_missed_pings: number;
  max_name_len: number;
  max_set_len: number;
}

export interface Welcome {
  version: number;
  node_id: string;
  pid: U64;
  limits: Limits;
  header_limits: { max_headers: number; max_header_bytes: number } | null;
  /** What the node implements (version 3 on). */
  features: Set<string>;
}

/** Splits `host:port` (IPv6 in brackets). */
export function splitAddress(address: string): { host: string; port: number } {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(address.trim());
  if (!m) throw new LintelError("invalid", `address ${address} is not host:port`);
  return { host: m[1]!, port: Number(m[2]) };
}

/** An Error frame's code for a decode fault (PROTOCOL.md section 1). */
function errorCodeFor(err: DecodeError): string {
  switch (err.code) {
    case "oversize":
      return "Oversize";
    case "unknown-kind":
      return "UnknownFrameKind";
    case "kind-too-new":
      return "UnexpectedFrame";
    default:
      return "Malformed";
  }
}

export class Connection {
  readonly welcome: Welcome;
  readonly address: string;
  /** How frames to the node are written. */
  readonly dialect: Dialect;
  onFrame: (frame: Frame) => void = () => {};
  /** A frame whose body names a variant this codec does not know; the connection stays. */
  onUnknownVariant: ((body: Uint8Array, err: UnknownVariantError) => void) | null = null;
  onClose: (err: LintelError) => void = () => {};
  /** Bytes of frames handed to the socket since the connection opened. */
  written = 0;
  private closed: LintelError | null = null;
  /** The node's FIN was read ('end'), before 'close' may have run. */
  private finRead = false;
  private lastHeard = Date.now();
  private liveness: NodeJS.Timeout | null = null;

  private constructor(
    private readonly socket: net.Socket,
    private readonly reader: FrameReader,
    welcome: Welcome,
    address: string,
  ) {
    this.welcome = welcome;
    this.address = address;
    this.dialect = { version: welcome.version, listed: welcome.features };
  }

  /** Connects and shakes hands. Rejects with `RefusedError`, `NodeError`, `ConnectionLostError` or `handshake-timeout`. */
  static open(opts: ConnectOptions): Promise<Connection> {
    const { host, port } = splitAddress(opts.address);
    const timeoutMs = opts.handshakeTimeoutMs ?? 5000;
    return new Promise<Connection>((resolve, reject) => {
      let settled = false;
      const socket: net.Socket = opts.tls
        ? tls.connect({
            host,
            port,
            ca: opts.tls.ca,
            cert: opts.tls.cert,
            key: opts.tls.key,
            servername: opts.tls.servername ?? (net.isIP(host) ? undefined : host),
            rejectUnauthorized: opts.tls.rejectUnauthorized ?? true,
          })
        : net.connect({ host, port });
      socket.setNoDelay(true);
      const reader = new FrameReader(65536);
      const fail = (err: LintelError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.destroy();
        reject(err);
      };
      const timer = setTimeout(
        () => fail(new LintelError("handshake-timeout", `no welcome from ${opts.address} within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const hello = encodeFrame({
        name: "Hello",
        body: { min_version: 1, max_version: PROTOCOL_VERSION, role: opts.role, name: opts.name, auth_token: opts.authToken ?? null },
      });
      socket.once(opts.tls ? "secureConnect" : "connect", () => socket.write(hello));
      socket.on("error", (e) => fail(new ConnectionLostError(`${opts.address}: ${e.message}`)));
      socket.on("close", () => fail(new ConnectionLostError(`${opts.address} closed during the handshake`)));
      const onData = (chunk: Buffer) => {
        if (settled) return;
        try {
          reader.push(chunk);
          const body = reader.next();
          if (body === null) return;
          const frame = decodeBody(body, PROTOCOL_VERSION);
          const b = frame.body;
          switch (frame.name) {
            case "Welcome":
            case "Welcome3": {
              const welcome: Welcome = {
                version: b.version,
                node_id: b.node_id,
                pid: b.pid,
                limits: b.limits,
                header_limits: b.header_limits ?? null,
                features: new Set<string>(b.features ?? []),
              };
              settled = true;
              clearTimeout(timer);
              socket.off("data", onData);
              socket.removeAllListeners("error");
              socket.removeAllListeners("close");
              reader.maxFrameLen = welcome.limits.max_frame_len;
              const conn = new Connection(socket, reader, welcome, opts.address);
              if (welcome.version >= 4) conn.send({ name: "Features", body: { features: [...opts.features], extensions: [] } });
              conn.attach();
              resolve(conn);
              return;
            }
            case "HelloRefused":
              return fail(new RefusedError(String(b.code), b.reason));
            case "Error":
              return fail(new NodeError(String(b.code), b.reason));
            case "Goodbye":
              return fail(new ConnectionLostError(`${opts.address} said goodbye: ${b.reason}`));
            default:
              return fail(new DecodeError("malformed", `${frame.name} before the welcome`));
          }
        } catch (err) {
          fail(err instanceof LintelError ? err : new DecodeError("malformed", String(err)));
        }
      };
      socket.on("data", onData);
    });
  }

  /** Wires the socket to the frame loop once the handshake is done (bytes past the welcome included). */
  private attach(): void {
    this.socket.on("data", (chunk: Buffer) => this.read(chunk));
    this.socket.on("end", () => {
      this.finRead = true;
    });
    this.socket.on("error", (e) => this.end(new ConnectionLostError(`${this.address}: ${e.message}`, true)));
    this.socket.on("close", () => {
      try {
        this.reader.end();
        this.end(new ConnectionLostError(`${this.address} closed the connection`, true));
      } catch (err) {
        this.end(err as LintelError);
      }
    });
    const interval = Math.max(50, Number(this.welcome.limits.ping_interval_ms));
    const silence = interval * (this.welcome.limits.max_missed_pings + 1) + 1000;
    let lastTick = Date.now();
    this.liveness = setInterval(() => {
      const now = Date.now();
      // A tick late by far means this thread was blocked, not that the node went quiet:
      // bytes may be waiting unread. Judge again once they have been read.
      const blocked = now - lastTick > 2 * interval;
      lastTick = now;
      if (blocked) {
        this.lastHeard = now;
        return;
      }
      if (now - this.lastHeard > silence) {
        this.end(new ConnectionLostError(`${this.address} silent for ${silence} ms`, true));
      }
    }, interval);
    this.liveness.unref();
    // Frames that came in the same read as the welcome.
    this.read(new Uint8Array(0));
  }

  private read(chunk: Uint8Array): void {
    if (this.closed) return;
    this.lastHeard = Date.now();
    try {
      if (chunk.length > 0) this.reader.push(chunk);
      for (;;) {
        const body = this.reader.next();
        if (body === null) break;
        let frame: Frame;
        try {
          frame = decodeBody(body, this.welcome.version);
        } catch (err) {
          if (err instanceof UnknownVariantError && this.onUnknownVariant) {
            this.onUnknownVariant(body, err);
            continue;
          }
          throw err;
        }
        if (frame.name === "Ping") {
          this.send({ name: "Pong", body: { nonce: frame.body.nonce } });
          continue;
        }
        if (frame.name === "Error") {
          this.end(new NodeError(String(frame.body.code), frame.body.reason));
          return;
        }
        this.onFrame(frame);
        if (this.closed) return;
      }
    } catch (err) {
      const e = err instanceof LintelError ? err : new DecodeError("malformed", String(err));
      if (e instanceof DecodeError && e.code !== "truncated") {
        this.trySend({ name: "Error", body: { code: errorCodeFor(e), reason: e.message } });
      }
      this.end(e);
    }
  }

  get isClosed(): boolean {
    return this.closed !== null;
  }

  /** Writes one frame. Throws `EncodeError` for a frame that cannot be written; false once closed. */
  send(frame: Frame): boolean {
    if (this.closed || this.peerEnded()) return false;
    const bytes = encodeFrame(frame, this.dialect, this.welcome.limits.max_frame_len);
    this.written += bytes.length;
    this.socket.write(bytes);
    return true;
  }

  /** Writes frames in one socket write. */
  sendMany(frames: readonly Frame[]): boolean {
    if (this.closed || this.peerEnded()) return false;
    if (frames.length === 1) return this.send(frames[0]!);
    const parts = frames.map((f) => encodeFrame(f, this.dialect, this.welcome.limits.max_frame_len));
    const all = Buffer.concat(parts);
    this.written += all.length;
    this.socket.write(all);
    return true;
  }

  /**
   * The node closed its side (its FIN was read, the 'close' event may not have run yet): a
   * frame written now is never read, so it is not written at all.
   */
  private peerEnded(): boolean {
    if (this.finRead || this.socket.readableEnded || !this.socket.writable) {
      this.end(new ConnectionLostError(`${this.address} closed the connection`, true));
      return true;
    }
    return false;
  }

  private trySend(frame: Frame): void {
    try {
      this.send(frame);
    } catch {
      // Nothing more to say on a connection that is ending.
    }
  }

  /** Says `Goodbye{reason}` and closes. */
  goodbye(reason: string): void {
    if (this.closed) return;
    this.trySend({ name: "Goodbye", body: { reason } });
    this.socket.end();
    this.end(new LintelError("closed", `closed: ${reason}`));
  }

  /** Closes at once, without a frame (a test's lost connection, a failure). */
  destroy(err: LintelError = new ConnectionLostError("closed by this side", true)): void {
    this.end(err);
  }

  private end(err: LintelError): void {
    if (this.closed) return;
    this.closed = err;
    if (this.liveness) clearInterval(this.liveness);
    if (!(err.code === "closed")) this.socket.destroy();
    else this.socket.setTimeout(2000, () => this.socket.destroy());
    this.onClose(err);
  }
}
