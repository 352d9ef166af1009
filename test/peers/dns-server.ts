/**
 * A real, authoritative-only DNS server on 127.0.0.1 for tests (UDP and TCP on one random port).
 *
 * Design notes
 * - Real wire format (dns-packet) over real sockets, so the code under test uses node's own
 *   resolver (c-ares) pointed at `server.address` exactly as production points it at
 *   POSTYARD_DNS_SERVERS. Nothing is mocked.
 * - The zone is mutable at runtime (`set`, `remove`, `servfail`) and every query is logged in
 *   `queries`, so tests can prove that answers were cached (no second query) or refreshed.
 * - Unknown names answer NXDOMAIN; a known name without records of the asked type answers
 *   NOERROR with no answers (NODATA), as real servers do. A CNAME is followed within the zone.
 * - UDP answers over 512 bytes without EDNS (or over the client's EDNS size) are truncated (TC)
 *   so the client retries over TCP, which is served too: long DKIM TXT records need it.
 * - Names are case-insensitive and may be written with or without the trailing dot.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import dnsPacket from 'dns-packet';
import type { Answer, DecodedPacket, Packet, Question } from 'dns-packet';

export type DnsRecordType = 'A' | 'AAAA' | 'MX' | 'TXT' | 'CNAME' | 'PTR';

export interface MxRecord {
  preference: number;
  /** Host name; '.' or '' is a null MX (RFC 7505). */
  exchange: string;
}

/** Record data per type: addresses for A/AAAA, MX objects, TXT strings (a string[] is one record
 * split into several character-strings), one target name for CNAME. */
export interface DnsRecordData {
  A: string[];
  AAAA: string[];
  MX: MxRecord[];
  TXT: (string | string[])[];
  CNAME: [string];
  /** Host names at <reversed address>.in-addr.arpa / ip6.arpa (reverse DNS). */
  PTR: string[];
}

/** Either the records alone (TTL defaults to 300 s) or records with their TTL in seconds. */
export type RRSetInput<T extends DnsRecordType> = DnsRecordData[T] | { ttl: number; records: DnsRecordData[T] };

export type ZoneInput = Record<string, { [T in DnsRecordType]?: RRSetInput<T> }>;

export interface DnsQueryLog {
  name: string;
  type: string;
  transport: 'udp' | 'tcp';
}

export interface DnsServer {
  port: number;
  /** 'host:port', ready for dns.Resolver#setServers or POSTYARD_DNS_SERVERS. */
  address: string;
  /** Every question received, in order. */
  queries: DnsQueryLog[];
  /** Replaces the records of one type at a name (creating the name if needed). */
  set<T extends DnsRecordType>(name: string, type: T, records: DnsRecordData[T], ttl?: number): void;
  /** Removes one type at a name, or the whole name (then it answers NXDOMAIN). */
  remove(name: string, type?: DnsRecordType): void;
  /** Makes a name answer SERVFAIL (or stop doing so). */
  servfail(name: string, on?: boolean): void;
  close(): Promise<void>;
}

const DEFAULT_TTL = 300;
const NOERROR = 0;
const SERVFAIL = 2;
const NXDOMAIN = 3;

interface RRSet {
  ttl: number;
  records: unknown[];
}

interface NameEntry {
  sets: Map<DnsRecordType, RRSet>;
}

const norm = (name: string) => name.toLowerCase().replace(/\.$/, '');

export async function startDnsServer(zone: ZoneInput = {}): Promise<DnsServer> {
  const names = new Map<string, NameEntry>();
  const queries: DnsQueryLog[] = [];
  const failing = new Set<string>();

  const entry = (name: string): NameEntry => {
    const key = norm(name);
    let e = names.get(key);
    if (!e) {
      e = { sets: new Map() };
      names.set(key, e);
    }
    return e;
  };

  const set = <T extends DnsRecordType>(name: string, type: T, records: DnsRecordData[T], ttl = DEFAULT_TTL) => {
    entry(name).sets.set(type, { ttl, records: [...records] });
  };

  for (const [name, types] of Object.entries(zone)) {
    entry(name);
    for (const [type, input] of Object.entries(types) as [DnsRecordType, RRSetInput<DnsRecordType>][]) {
      if (Array.isArray(input)) set(name, type, input);
      else set(name, type, input.records, input.ttl);
    }
  }

  const toAnswers = (name: string, type: DnsRecordType, rrset: RRSet): Answer[] =>
    rrset.records.map((data) => {
      const base = { name, ttl: rrset.ttl, class: 'IN' as const };
      switch (type) {
        case 'MX': {
          const mx = data as MxRecord;
          return {
            ...base,
            type,
            data: { preference: mx.preference, exchange: mx.exchange === '.' ? '' : mx.exchange },
          };
        }
        case 'TXT':
          return { ...base, type, data: data as string | string[] };
        default:
          return { ...base, type, data: data as string };
      }
    }) as Answer[];

  /** Builds the answer for one question: rcode plus answer records (following one CNAME chain). */
  const answer = (q: Question): { rcode: number; answers: Answer[] } => {
    const answers: Answer[] = [];
    let name = norm(q.name);
    for (let hops = 0; hops < 8; hops++) {
      if (failing.has(name)) return { rcode: SERVFAIL, answers: [] };
      const e = names.get(name);
      if (!e) return { rcode: answers.length ? NOERROR : NXDOMAIN, answers };
      const wanted = e.sets.get(q.type as DnsRecordType);
      if (wanted) return { rcode: NOERROR, answers: [...answers, ...toAnswers(name, q.type as DnsRecordType, wanted)] };
      const cname = e.sets.get('CNAME');
      if (!cname || q.type === 'CNAME') return { rcode: NOERROR, answers };
      answers.push(...toAnswers(name, 'CNAME', cname));
      name = norm(String(cname.records[0]));
    }
    return { rcode: SERVFAIL, answers: [] };
  };

  const respond = (query: DecodedPacket, transport: 'udp' | 'tcp'): Buffer => {
    const q = query.questions?.[0];
    const reply: Packet = {
      type: 'response',
      id: query.id ?? 0,
      // AA + the RD bit echoed; the rcode lives in the low 4 bits of the flags word.
      flags: dnsPacket.AUTHORITATIVE_ANSWER | ((query.flags ?? 0) & dnsPacket.RECURSION_DESIRED),
      questions: query.questions ?? [],
      answers: [],
    };
    if (!q) return dnsPacket.encode({ ...reply, flags: (reply.flags ?? 0) | 1 /* FORMERR */ });
    queries.push({ name: norm(q.name), type: q.type, transport });
    const { rcode, answers } = answer(q);
    const full = dnsPacket.encode({ ...reply, flags: (reply.flags ?? 0) | rcode, answers });
    if (transport === 'tcp') return full;
    const opt = query.additionals?.find((a) => a.type === 'OPT') as { udpPayloadSize?: number } | undefined;
    const limit = Math.max(512, opt?.udpPayloadSize ?? 512);
    if (full.length <= limit) return full;
    return dnsPacket.encode({ ...reply, flags: (reply.flags ?? 0) | dnsPacket.TRUNCATED_RESPONSE | rcode });
  };

  // UDP and TCP share one port number, as resolvers expect; retry if TCP finds it taken.
  for (let attempt = 0; ; attempt++) {
    const udp = dgram.createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      udp.once('error', reject);
      udp.bind(0, '127.0.0.1', () => resolve());
    });
    const port = udp.address().port;
    const tcp = net.createServer((socket) => serveTcp(socket));
    const tcpSockets = new Set<net.Socket>();
    const serveTcp = (socket: net.Socket) => {
      tcpSockets.add(socket);
      socket.on('close', () => tcpSockets.delete(socket));
      socket.on('error', () => socket.destroy());
      let buf = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk]);
        while (buf.length >= 2) {
          const len = buf.readUInt16BE(0);
          if (buf.length < len + 2) break;
          const msg = buf.subarray(2, len + 2);
          buf = buf.subarray(len + 2);
          try {
            const out = respond(dnsPacket.decode(msg), 'tcp');
            const framed = Buffer.alloc(out.length + 2);
            framed.writeUInt16BE(out.length, 0);
            out.copy(framed, 2);
            socket.write(framed);
          } catch {
            socket.destroy();
          }
        }
      });
    };
    const listening = await new Promise<boolean>((resolve) => {
      tcp.once('error', () => resolve(false));
      tcp.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (!listening) {
      udp.close();
      if (attempt >= 10) throw new Error('dns-server: no free port for UDP and TCP');
      continue;
    }
    udp.on('message', (msg, rinfo) => {
      try {
        udp.send(respond(dnsPacket.decode(msg), 'udp'), rinfo.port, rinfo.address);
      } catch {
        // Undecodable datagram: drop it, as a real server would.
      }
    });

    return {
      port,
      address: `127.0.0.1:${port}`,
      queries,
      set,
      remove(name, type) {
        if (type) names.get(norm(name))?.sets.delete(type);
        else names.delete(norm(name));
      },
      servfail(name, on = true) {
        if (on) failing.add(norm(name));
        else failing.delete(norm(name));
      },
      close() {
        for (const s of tcpSockets) s.destroy();
        return Promise.all([
          new Promise<void>((r) => udp.close(() => r())),
          new Promise<void>((r) => tcp.close(() => r())),
        ]).then(() => undefined);
      },
    };
  }
}
