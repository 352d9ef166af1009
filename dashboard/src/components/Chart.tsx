import { useId } from 'react';
import { bucketLabel, formatNumber, labelEvery, niceTicks } from '../lib/format.ts';

export interface Series {
  key: string;
  label: string;
  color: string;
}

export type Bucket = { start: string } & Record<string, number | string>;

const W = 520;
const H = 220;
const PAD = { top: 12, right: 12, bottom: 26, left: 42 };

function value(b: Bucket, key: string): number {
  const v = b[key];
  return typeof v === 'number' ? v : 0;
}

/**
 * A line chart drawn as SVG (no chart library, nothing fetched): one line per series over the
 * buckets, round y ticks, and the same numbers as a table for screen readers and keyboards.
 */
export function LineChart({
  title,
  buckets,
  series,
  bucket,
}: {
  title: string;
  buckets: Bucket[];
  series: Series[];
  bucket: 'hour' | 'day';
}) {
  const id = useId();
  const n = buckets.length;
  const max = Math.max(0, ...buckets.flatMap((b) => series.map((s) => value(b, s.key))));
  const ticks = niceTicks(max);
  const top = ticks[ticks.length - 1] ?? 1;
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const x = (i: number) => PAD.left + (n <= 1 ? plotW / 2 : (i * plotW) / (n - 1));
  const y = (v: number) => PAD.top + plotH - (v / top) * plotH;
  const every = labelEvery(n, 6);
  const totals = series.map((s) => `${s.label} ${formatNumber(buckets.reduce((a, b) => a + value(b, s.key), 0))}`);

  return (
    <figure className="chart">
      <figcaption id={`${id}-title`}>{title}</figcaption>
      <ul className="legend">
        {series.map((s) => (
          <li key={s.key}>
            <span className="swatch" style={{ backgroundColor: s.color }} aria-hidden="true" />
            {s.label}
          </li>
        ))}
      </ul>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-labelledby={`${id}-title ${id}-desc`} className="chart-svg">
        <title>{title}</title>
        <desc id={`${id}-desc`}>{`Totals over the period: ${totals.join(', ')}.`}</desc>
        {ticks.map((t) => (
          <g key={t}>
            <line x1={PAD.left} x2={W - PAD.right} y1={y(t)} y2={y(t)} className="grid" />
            <text x={PAD.left - 6} y={y(t) + 4} className="tick" textAnchor="end">
              {formatNumber(t)}
            </text>
          </g>
        ))}
        {buckets.map((b, i) =>
          i % every === 0 ? (
            <text
              key={b.start}
              x={x(i)}
              y={H - 8}
              className="tick"
              textAnchor={i === 0 ? 'start' : i === n - 1 ? 'end' : 'middle'}
            >
              {bucketLabel(b.start, bucket)}
            </text>
          ) : null,
        )}
        {series.map((s) => (
          <g key={s.key}>
            <polyline
              fill="none"
              stroke={s.color}
              strokeWidth={2}
              strokeLinejoin="round"
              points={buckets.map((b, i) => `${x(i)},${y(value(b, s.key))}`).join(' ')}
            />
            {buckets.map((b, i) => (
              <circle key={b.start} cx={x(i)} cy={y(value(b, s.key))} r={n > 40 ? 1.5 : 2.5} fill={s.color}>
                <title>{`${s.label}, ${bucketLabel(b.start, bucket)}: ${formatNumber(value(b, s.key))}`}</title>
              </circle>
            ))}
          </g>
        ))}
      </svg>
      <details className="chart-table">
        <summary>Show as table</summary>
        <div className="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">{bucket === 'hour' ? 'Hour (UTC)' : 'Day (UTC)'}</th>
                {series.map((s) => (
                  <th scope="col" key={s.key}>
                    {s.label}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {buckets.map((b) => (
                <tr key={b.start}>
                  <th scope="row">{bucketLabel(b.start, bucket)}</th>
                  {series.map((s) => (
                    <td key={s.key}>{formatNumber(value(b, s.key))}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </figure>
  );
}
