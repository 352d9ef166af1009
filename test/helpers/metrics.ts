/** Reading a Prometheus text exposition in tests: samples by name and labels. */
export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parseMetrics(text: string): PromSample[] {
  const out: PromSample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1] as string] = l[2] as string;
    out.push({ name: m[1] as string, labels, value: Number(m[3]) });
  }
  return out;
}

/** The sum of the samples named `name` whose labels include `labels`; undefined when there is none. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const hits = parseMetrics(text).filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  return hits.length === 0 ? undefined : hits.reduce((a, s) => a + s.value, 0);
}

/** Metric family names declared by `# TYPE` lines. */
export function metricFamilies(text: string): Set<string> {
  return new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1] as string));
}
