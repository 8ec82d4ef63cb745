// Small inline-SVG charts: horizontal bars, stacked time buckets, and a line. They scale with
// their container (viewBox, width 100%) and take their colours from CSS classes.

import { s, h } from './dom.js';

function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

/**
 * Horizontal bars: items [{label, value, cls, title}], value formatted by `fmt`.
 */
export function barChart(items, { fmt = String, title = '' } = {}) {
  if (items.length === 0) return h('p', { class: 'muted empty' }, 'No data in this window.');
  const row = 26;
  const labelW = 210;
  const width = 640;
  const height = items.length * row + 8;
  const max = niceMax(Math.max(...items.map((i) => i.value)));
  const barW = width - labelW - 80;
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, class: 'chart bar-chart', role: 'img', 'aria-label': title });
  items.forEach((it, i) => {
    const y = i * row + 4;
    const w = Math.max(1, (it.value / max) * barW);
    const label = it.label.length > 30 ? `${it.label.slice(0, 29)}…` : it.label;
    svg.append(
      s('text', { x: labelW - 8, y: y + 16, class: 'chart-label', 'text-anchor': 'end' }, label),
      s('rect', { x: labelW, y: y + 3, width: w, height: row - 8, class: `bar ${it.cls || ''}` },
        s('title', null, it.title || `${it.label}: ${fmt(it.value)}`)),
      s('text', { x: labelW + w + 6, y: y + 16, class: 'chart-value' }, fmt(it.value)),
    );
  });
  return h('div', { class: 'chart-box' }, svg);
}

/**
 * Stacked columns over time: buckets [{at, ...}], series [{key, cls, label}].
 */
export function stackedColumns(buckets, series, { title = '' } = {}) {
  const width = 1000;
  const height = 220;
  const padL = 36;
  const padB = 22;
  const n = Math.max(1, buckets.length);
  const totals = buckets.map((b) => series.reduce((a, sr) => a + (b[sr.key] || 0), 0));
  const max = niceMax(Math.max(0, ...totals));
  const colW = (width - padL) / n;
  const plotH = height - padB - 6;
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, class: 'chart columns', role: 'img', 'aria-label': title });
  for (const f of [0, 0.5, 1]) {
    const y = 6 + plotH * (1 - f);
    svg.append(
      s('line', { x1: padL, x2: width, y1: y, y2: y, class: 'grid' }),
      s('text', { x: padL - 4, y: y + 4, class: 'chart-axis', 'text-anchor': 'end' }, String(Math.round(max * f))),
    );
  }
  buckets.forEach((b, i) => {
    let y = 6 + plotH;
    for (const sr of series) {
      const v = b[sr.key] || 0;
      if (v <= 0) continue;
      const hgt = (v / max) * plotH;
      y -= hgt;
      svg.append(s('rect', { x: padL + i * colW + 1, y, width: Math.max(1, colW - 2), height: hgt, class: `bar ${sr.cls}` },
        s('title', null, `${new Date(b.at).toLocaleTimeString(undefined, { hour12: false })} ${sr.label}: ${v}`)));
    }
  });
  const first = buckets[0];
  const last = buckets[buckets.length - 1];
  if (first) {
    const fmtT = (iso) => new Date(iso).toLocaleTimeString(undefined, { hour12: false, hour: '2-digit', minute: '2-digit' });
    svg.append(
      s('text', { x: padL, y: height - 6, class: 'chart-axis' }, fmtT(first.at)),
      s('text', { x: width, y: height - 6, class: 'chart-axis', 'text-anchor': 'end' }, fmtT(last.at)),
    );
  }
  const legend = h('div', { class: 'legend' }, series.map((sr) => h('span', { class: 'legend-item' }, h('span', { class: `swatch ${sr.cls}` }), sr.label)));
  return h('div', { class: 'chart-box' }, svg, legend);
}

/**
 * A line over numeric x: points [{x, y}], labels by `fmtX` / `fmtY`.
 */
export function lineChart(points, { fmtX = String, fmtY = String, title = '', cls = 'line-a' } = {}) {
  if (points.length === 0) return h('p', { class: 'muted empty' }, 'No samples.');
  const width = 640;
  const height = 200;
  const padL = 70;
  const padB = 22;
  const xs = points.map((p) => p.x);
  const ys = points.map((p) => p.y);
  const minX = Math.min(...xs);
  const maxX = Math.max(...xs, minX + 1);
  const minY = Math.min(...ys) * 0.98;
  const maxY = Math.max(...ys, minY + 1) * 1.02;
  const plotW = width - padL - 8;
  const plotH = height - padB - 8;
  const px = (x) => padL + ((x - minX) / (maxX - minX)) * plotW;
  const py = (y) => 8 + plotH * (1 - (y - minY) / (maxY - minY));
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, class: 'chart line-chart', role: 'img', 'aria-label': title });
  for (const f of [0, 0.5, 1]) {
    const v = minY + (maxY - minY) * f;
    svg.append(
      s('line', { x1: padL, x2: width - 8, y1: py(v), y2: py(v), class: 'grid' }),
      s('text', { x: padL - 4, y: py(v) + 4, class: 'chart-axis', 'text-anchor': 'end' }, fmtY(v)),
    );
  }
  const d = points.map((p, i) => `${i === 0 ? 'M' : 'L'}${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`).join(' ');
  svg.append(s('path', { d, class: `line ${cls}` }));
  for (const p of points) {
    svg.append(s('circle', { cx: px(p.x), cy: py(p.y), r: 2.5, class: `dot ${cls}` }, s('title', null, `${fmtX(p.x)}: ${fmtY(p.y)}`)));
  }
  svg.append(
    s('text', { x: padL, y: height - 6, class: 'chart-axis' }, fmtX(minX)),
    s('text', { x: width - 8, y: height - 6, class: 'chart-axis', 'text-anchor': 'end' }, fmtX(maxX)),
  );
  return h('div', { class: 'chart-box' }, svg);
}
