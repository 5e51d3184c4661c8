// The booking page's script: plain JavaScript, no build step, no dependency. It asks
// the API on the page's own origin (so no CORS), as the person signed in on the page:
// a name sent as X-Principal where the server reads that header (the dev server), a
// token sent as Authorization: Bearer behind API Gateway's JWT authorizer.
//
// The calendar is a week of one-hour cells in the resource's time zone. Free cells come
// from the slots read (which applies the calendar rules and the load), held and booked
// ones from the availability read, the person's own from their reservations. The page
// polls every few seconds, and at once after a lost race: only a reserve call settles a
// race, so what the page shows is a hint and a 409 is news to show, not an error.
'use strict';

(function () {
  const HOUR = 3600 * 1000;
  const DAY_NAMES = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];
  const ACTIVE = 'status=HELD&status=CONFIRMING&status=CONFIRMED';
  const params = new URLSearchParams(location.search);
  // Seconds between refreshes; `?refresh=N` changes it (the browser tests slow it down
  // to hold a stale view on purpose).
  const POLL_SECONDS = Math.max(1, Number(params.get('refresh')) || 3);
  // The API lives beside the page: `/app` and `/` both resolve `v1/...` to `/v1/...`,
  // and a stage prefix in front of both is kept.
  const API = new URL('.', location.href);
  const IDENTITY = document.body.dataset.identity === 'bearer' ? 'bearer' : 'header';

  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs, ...children) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') node.className = v;
      else if (k === 'text') node.textContent = v;
      else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
      else if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children) node.append(c);
    return node;
  };

  const state = {
    who: sessionStorage.getItem('who') || '',
    resources: [],
    resourceId: sessionStorage.getItem('resource') || '',
    weekOffset: 0,
    builtFor: '',
    builtWeek: 0,
    cells: [],
    mine: [],
    holdId: null,
    holdSeen: false,
    waitStatus: {},
    generation: 0,
    refreshing: null,
  };

  // ---- talking to the API -------------------------------------------------------

  function headers(extra) {
    const h = Object.assign({ Accept: 'application/json' }, extra || {});
    if (IDENTITY === 'bearer') h.Authorization = 'Bearer ' + state.who;
    else h['X-Principal'] = state.who;
    return h;
  }

  /** Who the API takes the caller for: the name in header mode, the token's `sub` in
   *  jwt mode (read, not verified: the authorizer verifies). An admin's list of
   *  reservations is everyone's, so "My reservations" names its owner; `null` when the
   *  token cannot be read, and then the list is whatever the API answers. */
  function principal() {
    if (IDENTITY !== 'bearer') return state.who;
    try {
      const payload = state.who.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      return JSON.parse(atob(payload.padEnd(Math.ceil(payload.length / 4) * 4, '='))).sub || null;
    } catch (_) {
      return null;
    }
  }

  function newKey() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return 'k-' + Date.now().toString(36) + '-' + Math.random().toString(36).slice(2);
  }

  /** One call: `{status, body}`, where a problem document is the body of a 4xx/5xx. */
  async function api(method, path, body, keyed) {
    const extra = {};
    if (body !== undefined) extra['Content-Type'] = 'application/json';
    if (keyed) extra['Idempotency-Key'] = newKey();
    let response;
    try {
      response = await fetch(new URL(path, API), {
        method,
        headers: headers(extra),
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      return { status: 0, body: { title: 'The service did not answer', detail: String(e.message || e) } };
    }
    const text = await response.text();
    let parsed = null;
    try { parsed = text ? JSON.parse(text) : null; } catch (_) { parsed = { title: text }; }
    return { status: response.status, body: parsed };
  }

  /** A problem document in words for a person. */
  function explain(problem) {
    if (!problem) return 'Something went wrong.';
    const slug = String(problem.type || '').split('/').pop();
    if (slug === 'unauthenticated') return 'Sign in first: ' + (problem.detail || problem.title);
    if (slug === 'forbidden') return 'Only an admin may do that.';
    let text = problem.title || 'Something went wrong';
    if (problem.detail) text += ': ' + problem.detail;
    if (Array.isArray(problem.errors) && problem.errors.length) {
      text += ' (' + problem.errors.map((e) => e.field + ' ' + e.message).join('; ') + ')';
    }
    return text;
  }

  function say(text, kind) {
    const box = $('messages');
    box.textContent = text;
    box.className = 'message' + (kind ? ' ' + kind : '');
  }

  // ---- time in the resource's zone ----------------------------------------------

  const partsCache = {};
  function zoneParts(ms, zone) {
    let f = partsCache[zone];
    if (!f) {
      f = partsCache[zone] = new Intl.DateTimeFormat('en-US', {
        timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric',
        hour: 'numeric', minute: 'numeric', second: 'numeric',
      });
    }
    const p = {};
    for (const part of f.formatToParts(new Date(ms))) p[part.type] = Number(part.value);
    return p;
  }

  /** The zone's offset from UTC at an instant, in ms. */
  function offsetAt(ms, zone) {
    const p = zoneParts(ms, zone);
    return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second) - Math.floor(ms / 1000) * 1000;
  }

  /** The instant of a wall time in `zone` (a skipped one lands after the gap). */
  function wallToInstant(y, m, d, h, zone) {
    const guess = Date.UTC(y, m, d, h);
    const first = guess - offsetAt(guess, zone);
    const second = guess - offsetAt(first, zone);
    return second === first ? first : Math.max(first, second);
  }

  function fmt(ms, zone, opts) {
    return new Intl.DateTimeFormat('en-GB', Object.assign({ timeZone: zone }, opts)).format(new Date(ms));
  }

  function when(start, end, zone) {
    const s = Date.parse(start), e = Date.parse(end);
    return fmt(s, zone, { weekday: 'short', day: 'numeric', month: 'short' }) + ' ' +
      fmt(s, zone, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }) + '–' +
      fmt(e, zone, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
  }

  function zoneOf(resourceId) {
    const r = state.resources.find((x) => x.id === resourceId);
    return (r && r.time_zone) || 'UTC';
  }

  function nameOf(resourceId) {
    const r = state.resources.find((x) => x.id === resourceId);
    return r ? r.name : 'a resource';
  }

  function countdownText(expiresAt) {
    const left = Math.max(0, Math.ceil((Date.parse(expiresAt) - Date.now()) / 1000));
    return Math.floor(left / 60) + ':' + String(left % 60).padStart(2, '0');
  }

  function countdown(expiresAt) {
    return el('span', { class: 'countdown', 'data-expires': expiresAt, text: countdownText(expiresAt) });
  }

  /** The shown week: Monday 00:00 to the next Monday 00:00 in the zone. */
  function week(zone) {
    const now = zoneParts(Date.now(), zone);
    const today = new Date(Date.UTC(now.year, now.month - 1, now.day));
    const back = (today.getUTCDay() + 6) % 7;
    const days = [];
    for (let i = 0; i < 8; i++) {
      const d = new Date(Date.UTC(now.year, now.month - 1, now.day - back + 7 * state.weekOffset + i));
      days.push({ y: d.getUTCFullYear(), m: d.getUTCMonth(), d: d.getUTCDate() });
    }
    return days;
  }

  // ---- the calendar ------------------------------------------------------------

  function current() {
    return state.resources.find((r) => r.id === state.resourceId) || null;
  }

  /** Builds the grid's cells once per resource and week; refreshes only restyle them,
   *  so focus and references to cells survive a refresh. */
  function buildGrid(resource) {
    const zone = resource.time_zone || 'UTC';
    const days = week(zone);
    const key = resource.id + '|' + state.weekOffset + '|' + days[0].y + days[0].m + days[0].d;
    if (state.builtFor === key) return;
    state.builtFor = key;
    state.builtWeek = state.weekOffset;
    const table = $('calendar');
    table.textContent = '';
    delete table.dataset.week;
    const head = el('tr', {}, el('th', { class: 'hour', scope: 'col' }, el('span', { class: 'sr-only', text: 'Time' })));
    for (let i = 0; i < 7; i++) {
      const noon = wallToInstant(days[i].y, days[i].m, days[i].d, 12, zone);
      head.append(el('th', { scope: 'col', text: fmt(noon, zone, { weekday: 'short', day: 'numeric', month: 'short' }) }));
    }
    table.append(el('thead', {}, head));
    const body = el('tbody');
    state.cells = [];
    for (let h = 0; h < 24; h++) {
      const row = el('tr', {}, el('th', { class: 'hour', scope: 'row', text: String(h).padStart(2, '0') + ':00' }));
      for (let i = 0; i < 7; i++) {
        const start = wallToInstant(days[i].y, days[i].m, days[i].d, h, zone);
        const end = h === 23
          ? wallToInstant(days[i + 1].y, days[i + 1].m, days[i + 1].d, 0, zone)
          : wallToInstant(days[i].y, days[i].m, days[i].d, h + 1, zone);
        const button = el('button', { type: 'button', 'data-day': i, 'data-hour': h, 'data-start': new Date(start).toISOString() });
        const cell = { start, end, button, action: null };
        button.addEventListener('click', () => cell.action && cell.action());
        state.cells.push(cell);
        row.append(el('td', {}, button));
      }
      body.append(row);
    }
    table.append(body);
    const first = wallToInstant(days[0].y, days[0].m, days[0].d, 0, zone);
    const last = wallToInstant(days[6].y, days[6].m, days[6].d, 12, zone);
    $('week-label').textContent = fmt(first, zone, { day: 'numeric', month: 'short' }) + ' – ' +
      fmt(last, zone, { day: 'numeric', month: 'short', year: 'numeric' });
    $('zone').textContent = 'Times in ' + zone;
  }

  /** Colours the cells from one round of reads; `data-resource` and `data-week` on the
   *  table then say whose week (0 = this one) the colours are of. */
  function paint(resource, availability, slots) {
    const zone = resource.time_zone || 'UTC';
    const free = new Map(slots.map((s) => [Date.parse(s.start), s]));
    const taken = availability.taken.map((t) => Object.assign({ s: Date.parse(t.start), e: Date.parse(t.end) }, t));
    const mine = state.mine
      .filter((r) => r.resource_id === resource.id)
      .map((r) => Object.assign({ s: Date.parse(r.start), e: Date.parse(r.end) }, r));
    const now = Date.now();
    for (const cell of state.cells) {
      const range = when(new Date(cell.start).toISOString(), new Date(cell.end).toISOString(), zone);
      const overlaps = (x) => x.s < cell.end && cell.start < x.e;
      const own = mine.find(overlaps);
      const slot = free.get(cell.start);
      const claims = taken.filter(overlaps);
      let kind, label, content, action = null;
      if (own) {
        kind = own.status === 'HELD' ? 'mine-held' : 'mine';
        label = own.status === 'HELD' ? 'your hold, expires in' : 'booked by you';
        content = own.status === 'HELD' ? ['Your hold ', countdown(own.expires_at)] : ['Yours'];
        if (own.status === 'HELD') action = () => { state.holdId = own.id; state.holdSeen = true; showHold(); };
      } else if (cell.end <= now) {
        kind = 'past'; label = 'past'; content = ['–'];
      } else if (slot) {
        kind = 'free';
        label = 'free, press to hold';
        content = [resource.capacity > 1 ? slot.remaining + ' free' : 'Free'];
        action = () => hold(resource, cell);
      } else if (claims.length) {
        const held = claims.filter((c) => c.status === 'HELD' && c.expires_at);
        if (held.length) {
          const soonest = held.map((c) => c.expires_at).sort()[0];
          kind = 'held'; label = 'held by someone, full; press to join the waitlist';
          content = ['Held ', countdown(soonest)];
        } else {
          kind = 'taken'; label = 'booked, full; press to join the waitlist';
          content = ['Booked'];
        }
        action = () => joinWaitlist(resource, cell);
      } else {
        kind = 'closed'; label = 'closed'; content = ['–'];
      }
      const b = cell.button;
      cell.action = action;
      b.className = 'cell-' + (kind === 'mine-held' ? 'mine' : kind === 'past' ? 'closed' : kind);
      b.dataset.state = kind;
      b.disabled = !action;
      b.setAttribute('aria-label', range + ': ' + label);
      b.textContent = '';
      b.append(...content);
    }
    $('calendar').dataset.week = String(state.builtWeek);
    $('calendar').dataset.resource = resource.id;
  }

  // ---- actions -----------------------------------------------------------------

  async function hold(resource, cell) {
    const zone = resource.time_zone || 'UTC';
    const start = new Date(cell.start).toISOString(), end = new Date(cell.end).toISOString();
    say('Holding ' + when(start, end, zone) + '…');
    const r = await api('POST', 'v1/reservations', { resource_id: resource.id, start, end }, true);
    if (r.status === 201 || r.status === 202) {
      state.holdId = r.body.id;
      state.holdSeen = true;
      state.mine = [r.body].concat(state.mine.filter((x) => x.id !== r.body.id));
      say('Held ' + when(start, end, zone) + ' for you. Confirm it before the countdown ends.', 'ok');
      showHold();
    } else if (r.status === 409 && String(r.body && r.body.type).endsWith('/slot-unavailable')) {
      say('Just taken: someone else got ' + when(start, end, zone) + ' a moment ago. The calendar is refreshed.', 'error');
    } else {
      say(explain(r.body), 'error');
    }
    await refresh();
  }

  async function confirmReservation(id) {
    const r = await api('POST', 'v1/reservations/' + id + '/confirm', undefined, true);
    if (r.status === 200 || r.status === 202) {
      const what = when(r.body.start, r.body.end, zoneOf(r.body.resource_id));
      if (r.body.status === 'CONFIRMED') say('Confirmed: ' + nameOf(r.body.resource_id) + ', ' + what + '.', 'ok');
      else say('Confirming ' + what + ' with the system of record…', 'ok');
    } else if (r.status === 409 && String(r.body && r.body.type).endsWith('/reservation-not-held')) {
      say('Too late: this hold has expired or was released. Pick a free time again.', 'error');
    } else {
      say(explain(r.body), 'error');
    }
    await refresh();
  }

  async function cancelReservation(id, verb) {
    const r = await api('DELETE', 'v1/reservations/' + id);
    if (r.status === 200) {
      const what = when(r.body.start, r.body.end, zoneOf(r.body.resource_id));
      say((r.body.status === 'RELEASED' ? 'Released ' : 'Cancelled ') + nameOf(r.body.resource_id) + ', ' + what + '.', 'ok');
    } else {
      say(verb + ' failed. ' + explain(r.body), 'error');
    }
    await refresh();
  }

  async function joinWaitlist(resource, cell) {
    const zone = resource.time_zone || 'UTC';
    const start = new Date(cell.start).toISOString(), end = new Date(cell.end).toISOString();
    const r = await api('POST', 'v1/resources/' + resource.id + '/waitlist', { start, end }, true);
    if (r.status === 201 || r.status === 200) {
      state.waitStatus[r.body.id] = r.body.status;
      if (r.body.status === 'OFFERED') say('It just freed up: ' + when(start, end, zone) + ' is offered to you.', 'ok');
      else say('You are on the waitlist for ' + when(start, end, zone) + ' (position ' + r.body.position + '). Keep this page open to see the offer.', 'ok');
    } else {
      say(explain(r.body), 'error');
    }
    await refresh();
  }

  async function leaveWaitlist(id) {
    const r = await api('DELETE', 'v1/waitlist/' + id);
    if (r.status === 200) say('You left the waitlist.', 'ok');
    else say(explain(r.body), 'error');
    await refresh();
  }

  // ---- side panels -------------------------------------------------------------

  function showHold() {
    const held = state.mine.find((r) => r.id === state.holdId && r.status === 'HELD');
    const panel = $('hold');
    if (!held) {
      panel.hidden = true;
      return;
    }
    panel.hidden = false;
    $('hold-what').textContent = nameOf(held.resource_id) + ', ' + when(held.start, held.end, zoneOf(held.resource_id));
    const c = $('hold-countdown');
    c.dataset.expires = held.expires_at;
    c.textContent = countdownText(held.expires_at);
  }

  function renderMine() {
    const list = $('mine');
    list.textContent = '';
    if (!state.mine.length) list.append(el('li', { class: 'muted', text: 'Nothing booked yet.' }));
    for (const r of state.mine) {
      const what = nameOf(r.resource_id) + ', ' + when(r.start, r.end, zoneOf(r.resource_id));
      const item = el('li', { 'data-id': r.id, 'data-status': r.status });
      const text = el('span', { class: 'what' }, what + ' · ');
      if (r.status === 'HELD') {
        text.append(r.source === 'waitlist_offer' ? 'offered, ' : 'held, ', countdown(r.expires_at), ' left');
        item.append(text,
          el('button', { type: 'button', class: 'primary', text: 'Confirm', 'aria-label': 'Confirm ' + what, onclick: () => confirmReservation(r.id) }),
          el('button', { type: 'button', text: 'Release', 'aria-label': 'Release ' + what, onclick: () => cancelReservation(r.id, 'Release') }));
      } else {
        text.append(r.status === 'CONFIRMED' ? 'confirmed' : 'confirming');
        item.append(text, el('button', { type: 'button', text: 'Cancel', 'aria-label': 'Cancel ' + what, disabled: r.status !== 'CONFIRMED', onclick: () => cancelReservation(r.id, 'Cancel') }));
      }
      list.append(item);
    }
  }

  async function refreshWaits() {
    const list = $('waits');
    list.textContent = '';
    // The caller's own entries, from the server: the same in every browser.
    const r = await api('GET', 'v1/waitlist?limit=100');
    if (r.status !== 200) return;
    let shown = 0;
    for (const e of r.body.items) {
      const id = e.id;
      const zone = zoneOf(e.resource_id);
      const what = nameOf(e.resource_id) + ', ' + when(e.start, e.end, zone);
      const before = state.waitStatus[id];
      state.waitStatus[id] = e.status;
      const item = el('li', { 'data-id': id, 'data-status': e.status });
      if (e.status === 'WAITING') {
        shown++;
        item.append(el('span', { class: 'what', text: what + ' · waiting, position ' + e.position }),
          el('button', { type: 'button', text: 'Leave', onclick: () => leaveWaitlist(id) }));
      } else if (e.status === 'OFFERED') {
        shown++;
        if (before !== 'OFFERED') say('An offer arrived: ' + what + ' is held for you. Accept it before it lapses.', 'ok');
        const offer = state.mine.find((x) => x.id === e.reservation_id);
        const text = el('span', { class: 'what' }, what + ' · offered to you');
        if (offer && offer.expires_at) text.append(', ', countdown(offer.expires_at), ' left');
        item.append(text,
          el('button', { type: 'button', class: 'primary', id: 'accept-offer', text: 'Accept', onclick: () => confirmReservation(e.reservation_id) }),
          el('button', { type: 'button', text: 'Decline', onclick: () => leaveWaitlist(id) }));
      } else {
        if (e.status === 'EXPIRED' && before && before !== 'EXPIRED') say('The offer for ' + what + ' lapsed.', 'error');
        continue;
      }
      list.append(item);
    }
    $('waitlist').hidden = !shown;
  }

  async function refreshBookings(resource) {
    const list = $('bookings');
    if (!$('admin').open || !resource) return;
    const r = await api('GET', 'v1/reservations?resource_id=' + resource.id + '&' + ACTIVE + '&limit=100');
    list.textContent = '';
    if (r.status !== 200) {
      list.append(el('li', { class: 'muted', text: explain(r.body) }));
      return;
    }
    if (!r.body.items.length) list.append(el('li', { class: 'muted', text: 'No bookings.' }));
    for (const b of r.body.items) {
      const what = when(b.start, b.end, resource.time_zone || 'UTC');
      list.append(el('li', { 'data-id': b.id, 'data-owner': b.owner },
        el('span', { class: 'what', text: b.owner + ' · ' + what + ' · ' + b.status.toLowerCase() }),
        el('button', { type: 'button', text: 'Cancel', 'aria-label': 'Cancel ' + b.owner + "'s booking " + what, disabled: b.status === 'CONFIRMING', onclick: () => cancelReservation(b.id, 'Cancel') })));
    }
  }

  // ---- refresh -----------------------------------------------------------------

  async function loadResources() {
    const r = await api('GET', 'v1/resources?limit=100');
    if (r.status !== 200) {
      say(explain(r.body), 'error');
      return;
    }
    state.resources = r.body.items;
    const select = $('resource');
    select.textContent = '';
    for (const res of state.resources) {
      select.append(el('option', { value: res.id, text: res.name + (res.capacity > 1 ? ' (' + res.capacity + ' places)' : '') }));
    }
    if (!current() && state.resources.length) state.resourceId = state.resources[0].id;
    select.value = state.resourceId;
    state.builtFor = '';
  }

  /** Reads everything shown, at most one refresh at a time (a second asks for another
   *  round after the running one). */
  function refresh() {
    if (state.refreshing) {
      state.again = true;
      return state.refreshing;
    }
    state.refreshing = (async () => {
      try {
        do {
          state.again = false;
          await refreshOnce();
        } while (state.again);
      } finally {
        state.refreshing = null;
      }
    })();
    return state.refreshing;
  }

  async function refreshOnce() {
    // Rounds run one after another, so a round numbered above what a reader saw in
    // `data-started` has read everything after that moment once `data-refreshed` reaches it.
    const round = ++state.generation;
    document.body.dataset.started = String(round);
    try {
      await readEverything();
    } finally {
      document.body.dataset.refreshed = String(round);
    }
  }

  async function readEverything() {
    if (!state.who) return;
    const resource = current();
    const me = principal();
    const mine = await api('GET', 'v1/reservations?' + ACTIVE + '&limit=100' + (me ? '&owner=' + encodeURIComponent(me) : ''));
    if (mine.status === 200) state.mine = mine.body.items;
    else if (mine.status === 401) { say(explain(mine.body), 'error'); return; }
    if (state.holdSeen && !state.mine.some((r) => r.id === state.holdId && r.status === 'HELD')) {
      const gone = await api('GET', 'v1/reservations/' + state.holdId);
      if (gone.status === 200 && gone.body.status === 'EXPIRED') {
        say('Your hold on ' + when(gone.body.start, gone.body.end, zoneOf(gone.body.resource_id)) + ' expired; the time is free again.', 'error');
      }
      state.holdSeen = false;
    }
    renderMine();
    showHold();
    await refreshWaits();
    if (resource) {
      buildGrid(resource);
      const w = state.cells.length ? '&from=' + encodeURIComponent(new Date(state.cells[0].start).toISOString()) +
        '&to=' + encodeURIComponent(new Date(state.cells[state.cells.length - 1].end).toISOString()) : '';
      const [a, s] = await Promise.all([
        api('GET', 'v1/resources/' + resource.id + '/availability?' + w.slice(1)),
        api('GET', 'v1/resources/' + resource.id + '/slots?duration=PT1H' + w),
      ]);
      if (a.status === 200 && s.status === 200 && current() === resource) paint(resource, a.body, s.body.slots);
      else if (a.status !== 200) say(explain(a.body), 'error');
      else if (s.status !== 200) say(explain(s.body), 'error');
      await refreshBookings(resource);
    }
  }

  /** Every second: the countdowns, and a refresh as soon as one reaches zero. */
  function tick() {
    let lapsed = false;
    for (const node of document.querySelectorAll('[data-expires]')) {
      const text = countdownText(node.dataset.expires);
      node.textContent = text;
      if (text === '0:00' && !node.dataset.lapsed) {
        node.dataset.lapsed = '1';
        lapsed = true;
      }
    }
    if (lapsed) refresh();
  }

  // ---- wiring ------------------------------------------------------------------

  async function signIn(who) {
    state.who = who.trim();
    sessionStorage.setItem('who', state.who);
    $('signed-in').textContent = state.who ? (IDENTITY === 'bearer' ? 'Token set.' : 'Signed in as ' + state.who + '.') : '';
    $('app').hidden = !state.who;
    if (!state.who) return;
    await loadResources();
    await refresh();
  }

  function setup() {
    if (IDENTITY === 'bearer') {
      $('who-label').textContent = 'Access token';
      $('who').type = 'password';
      $('who').autocomplete = 'off';
    }
    $('identity').addEventListener('submit', (e) => { e.preventDefault(); signIn($('who').value); });
    $('resource').addEventListener('change', (e) => {
      state.resourceId = e.target.value;
      sessionStorage.setItem('resource', state.resourceId);
      state.weekOffset = 0;
      refresh();
    });
    $('week-prev').addEventListener('click', () => { state.weekOffset--; refresh(); });
    $('week-next').addEventListener('click', () => { state.weekOffset++; refresh(); });
    $('refresh').addEventListener('click', () => refresh());
    $('confirm').addEventListener('click', () => confirmReservation(state.holdId));
    $('release').addEventListener('click', () => cancelReservation(state.holdId, 'Release'));
    $('admin').addEventListener('toggle', () => refresh());
    $('new-resource').addEventListener('submit', async (e) => {
      e.preventDefault();
      const body = { name: $('new-name').value, capacity: Number($('new-capacity').value), hold_ttl_seconds: Number($('new-ttl').value) };
      if ($('new-zone').value.trim()) body.time_zone = $('new-zone').value.trim();
      const r = await api('POST', 'v1/resources', body, true);
      if (r.status === 201) {
        state.resourceId = r.body.id;
        say('Created ' + r.body.name + '.', 'ok');
        $('new-name').value = '';
        await loadResources();
      } else {
        say(explain(r.body), 'error');
      }
      await refresh();
    });
    $('archive').addEventListener('click', async () => {
      const resource = current();
      if (!resource) return;
      const r = await api('DELETE', 'v1/resources/' + resource.id);
      if (r.status === 200) {
        say('Archived ' + resource.name + ': it takes no new bookings; its bookings stay.', 'ok');
        state.resourceId = '';
        await loadResources();
      } else {
        say(explain(r.body), 'error');
      }
      await refresh();
    });
    setInterval(refresh, POLL_SECONDS * 1000);
    setInterval(tick, 1000);
    if (state.who) {
      $('who').value = IDENTITY === 'bearer' ? '' : state.who;
      signIn(state.who);
    }
  }

  setup();
})();
