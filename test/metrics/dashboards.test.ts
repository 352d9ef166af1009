/**
 * docs/alerts.yml and docs/grafana/postyard.json cannot rot: the rules file is valid YAML in
 * Prometheus' rule-file shape (and passes `promtool check rules` where promtool is installed),
 * and every metric named by an alert expression or a dashboard query is one a Postyard node
 * exposes (read from a real scrape, not a list kept here).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createTestContext, type TestContext } from '../helpers/context.ts';
import { metricFamilies } from '../helpers/metrics.ts';
import { REPO_ROOT } from '../helpers/server-process.ts';

interface Rule {
  alert?: string;
  expr?: unknown;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const RULES_FILE = join(REPO_ROOT, 'docs/alerts.yml');
const DASHBOARD_FILE = join(REPO_ROOT, 'docs/grafana/postyard.json');
/** Series Prometheus itself adds to every target. */
const SYNTHETIC = new Set(['up', 'scrape_duration_seconds']);

let ctx: TestContext;
let families: Set<string>;

beforeAll(async () => {
  ctx = await createTestContext();
  const res = await ctx.app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  families = metricFamilies(res.body);
});
afterAll(async () => {
  await ctx?.close();
});

/** Metric names in a PromQL expression: identifiers of our namespaces, minus histogram suffixes. */
function metricsIn(expr: string): string[] {
  const names = new Set<string>();
  const withoutStrings = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  for (const m of withoutStrings.matchAll(/\b(postyard_\w+|nodejs_\w+|process_\w+|up)\b/g)) {
    const name = m[1] as string;
    const base = name.replace(/_(bucket|sum|count)$/, '');
    names.add(base !== name && families.has(base) ? base : name);
  }
  return [...names];
}

function expectKnown(where: string, expr: string) {
  const names = metricsIn(expr);
  expect(names.length, `${where} names no metric: ${expr}`).toBeGreaterThan(0);
  for (const n of names) {
    if (SYNTHETIC.has(n)) continue;
    expect(families.has(n), `${where}: ${n} is not exposed by /metrics`).toBe(true);
  }
}

describe('docs/alerts.yml', () => {
  const doc = parse(readFileSync(RULES_FILE, 'utf8')) as { groups: { name: string; rules: Rule[] }[] };

  it('is a Prometheus rule file: groups of uniquely named alerts with expr, for, severity and summary', () => {
    expect(Array.isArray(doc.groups)).toBe(true);
    const names = new Set<string>();
    for (const g of doc.groups) {
      expect(typeof g.name).toBe('string');
      expect(g.rules.length, g.name).toBeGreaterThan(0);
      for (const r of g.rules) {
        expect(r.alert, JSON.stringify(r)).toMatch(/^Postyard[A-Za-z]+$/);
        expect(names.has(r.alert as string), `duplicate alert ${r.alert}`).toBe(false);
        names.add(r.alert as string);
        expect(typeof r.expr, r.alert).toBe('string');
        expect(r.for, r.alert).toMatch(/^\d+[smh]$/);
        expect(['page', 'warning']).toContain(r.labels?.severity);
        expect(r.annotations?.summary, r.alert).toBeTruthy();
      }
    }
    // The mail path is covered: queue, deliveries, webhooks, submission, the nodes themselves.
    for (const a of ['PostyardQueueFallingBehind', 'PostyardHighBounceRate', 'PostyardWebhookLag', 'PostyardNodeDown'])
      expect(names).toContain(a);
  });

  it('names only metrics a node exposes', () => {
    for (const g of doc.groups) for (const r of g.rules) expectKnown(`alert ${r.alert}`, r.expr as string);
  });

  it('passes promtool check rules (when promtool is installed)', (t) => {
    let promtool = true;
    try {
      execFileSync('promtool', ['--version'], { stdio: 'ignore' });
    } catch {
      promtool = false;
    }
    if (!promtool) return t.skip('promtool is not installed: the YAML shape and metric names are checked above');
    execFileSync('promtool', ['check', 'rules', RULES_FILE], { stdio: 'pipe' });
  });
});

describe('docs/grafana/postyard.json', () => {
  const dash = JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as {
    uid: string;
    title: string;
    panels: { type: string; title: string; targets?: { expr: string }[] }[];
  };

  it('is a dashboard whose every query names metrics a node exposes', () => {
    expect(dash.uid).toBe('postyard-mail-path');
    const queries = dash.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
    expect(queries.length).toBeGreaterThan(15);
    for (const q of queries) expectKnown(`panel "${q.panel}"`, q.expr);
    // Every mail-path family has a panel.
    const used = new Set(queries.flatMap((q) => metricsIn(q.expr)));
    for (const f of families) if (f.startsWith('postyard_')) expect(used, `no panel shows ${f}`).toContain(f);
  });
});
