// The booking page's script: plain JavaScript, no build step, no dependency. It asks
// the API on the page's own origin (so no CORS), as the person signed in on the page:
// a name sent as X-Principal where the server reads that header (the dev server), a
// token sent as Authorization: Bearer behind API Gateway's JWT authorizer.
//
// The times shown are the resource's own: the slots read of the shown week for the
// chosen length, asked with `unavailable=true`, lists every start of the resource's
// grid, bookable or with the reason it is not (closed, taken, kept free by a buffer,
// too soon, too far ahead, past). The availability read tells a hold from a booking,
// the person's reservations mark their own. A phone shows one day at a time under a
// day picker; a wide screen the week. The page polls every few seconds, and at once
// after a lost race: only a reserve call settles a race, so what the page shows is a
// hint and a 409 is news to show, not an error.
'use strict';

(function () {
  const DAY_NAMES = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];
  const ACTIVE = 'status=HELD&status=CONFIRMING&status=CONFIRMED';
  const LENGTHS = [15, 30, 45, 60, 90, 120, 180, 240, 480];
  const params = new URLSearchParams(location.search);
  // Seconds between refreshes; `?refresh=N` changes it (the browser tests slow it down
  // to hold a stale view on purpose).
  const POLL_SECONDS = Math.max(1, Number(params.get('refresh')) || 3);
  // The API lives beside the page: `/app` and `/` both resolve `v1/...` to `/v1/...`,
  // and a stage prefix in front of both is kept.
  const API = new URL('.', location.href);
  const IDENTITY = document.body.dataset.identity === 'bearer' ? 'bearer' : 'header';
  // The delivery attempts the admin panel shows, newest first.
  const DELIVERIES_SHOWN = 20;

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
    admin: false,
    resources: [],
    // The pools, for "Together with" ("any free chair").
    pools: [],
    // "Together with": '' (nothing), 'resource:<id>' or 'pool:<id>'.
    with: '',
    resourceId: sessionStorage.getItem('resource') || '',
    weekOffset: 0,
    // The day shown on a phone, 0 = Monday; `null` until a week is read.
    day: null,
    // The chosen length in minutes, per resource; unset: the resource's default.
    lengths: {},
    mine: [],
    holdId: null,
    holdSeen: false,
    // The reservation being moved to another start, if any.
    moving: null,
    waitStatus: {},
    settingsFor: '',
    generation: 0,
    refreshing: null,
    // The read of the first start that can be booked, while under way (see
    // placeAtFirstFree); the calendar is not drawn meanwhile.
    placing: null,
    // Whether the person stepped to another week since choosing the resource.
    stepped: false,
  };

  // ---- talking to the API -------------------------------------------------------

  function headers(extra) {
    const h = Object.assign({ Accept: 'application/json' }, extra || {});
    if (IDENTITY === 'bearer') h.Authorization = 'Bearer ' + state.who;
    else h['X-Principal'] = encodeURIComponent(state.who);
    return h;
  }

  /** Why the API would refuse `name` as a principal (docs/api.md, Identity), in words;
   *  `null` when it takes it. A header carries ASCII only, so the name travels
   *  percent-encoded as UTF-8 (`headers`): any printable name, 1 to 255 characters, no
   *  control character, no white space at either end (the page trims it). */
  function nameProblem(name) {
    if (!name) return 'Type your name first.';
    if ([...name].length > 255) return 'A name is at most 255 characters; this one has ' + [...name].length + '.';
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) return 'A name cannot hold a line break, a tab or another control character.';
    return null;
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
    if (slug === 'limit-exceeded') {
      text += problem.frees_at
        ? ' A place frees when one of your holds lapses, at ' + fmt(Date.parse(problem.frees_at), BROWSER_ZONE, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }) + ' ' + zoneName(BROWSER_ZONE) + '.'
        : ' Cancel one of your bookings in that period to book another.';
    }
    if (Array.isArray(problem.errors) && problem.errors.length) {
      text += ' (' + problem.errors.map((e) => e.field + ' ' + e.message).join('; ') + ')';
    }
    return text;
  }

  /** A control that cannot be used now: it stays in the tab order, so that focus
   *  reaches it and reads its reason (`note`, by aria-describedby), and a press says
   *  the reason ([orWhy]). It looks disabled (app.css). */
  function unavailable(button, note) {
    button.setAttribute('aria-disabled', 'true');
    button.setAttribute('aria-describedby', note.id);
  }

  /** A press handler: `action`, or, on a control made [unavailable], its reason said. */
  const orWhy = (action) => (e) => {
    const button = e.currentTarget;
    if (button.getAttribute('aria-disabled') !== 'true') return action();
    say('Not now: ' + document.getElementById(button.getAttribute('aria-describedby')).textContent);
  };

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
  function wallToInstant(y, m, d, h, zone, minute) {
    const guess = Date.UTC(y, m, d, h, minute || 0);
    const first = guess - offsetAt(guess, zone);
    const second = guess - offsetAt(first, zone);
    return second === first ? first : Math.max(first, second);
  }

  function fmt(ms, zone, opts) {
    return new Intl.DateTimeFormat('en-GB', Object.assign({ timeZone: zone }, opts)).format(new Date(ms));
  }

  /** A range in `zone`; with `named`, followed by the zone's name, for a list whose
   *  times are in more than one zone or in another zone than the calendar's. */
  function when(start, end, zone, named) {
    const s = Date.parse(start), e = Date.parse(end);
    return fmt(s, zone, { weekday: 'short', day: 'numeric', month: 'short' }) + ' ' +
      fmt(s, zone, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }) + '–' +
      fmt(e, zone, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }) + (named ? ' ' + zoneName(zone) : '');
  }

  /** A zone as a person says it: "New York time" for America/New_York, "UTC" for UTC. */
  function zoneName(zone) {
    const z = zone || 'UTC';
    if (z === 'UTC' || z === 'Etc/UTC') return 'UTC';
    return z.split('/').pop().replace(/_/g, ' ') + ' time';
  }

  /** The browser's own zone, which times not of a resource (a hold's lapse across the
   *  service, a webhook's delivery) are shown in, and named. */
  const BROWSER_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

  /** Whether the times of resources `ids` need their zone named: more than one zone,
   *  or one that is not the zone of the calendar shown. */
  function zonesMixed(ids) {
    const shown = current();
    const zones = new Set(ids.map(zoneOf));
    if (shown) zones.add(shown.time_zone || 'UTC');
    return zones.size > 1;
  }

  function zoneOf(resourceId) {
    const r = state.resources.find((x) => x.id === resourceId);
    return (r && r.time_zone) || 'UTC';
  }

  /** The resources of a booking by name, every item of it ("Salon chair + Back room");
   *  a pool's item by the member it picked. */
  function namesOf(r) {
    return itemResources(r).map(nameOf).join(' + ');
  }

  /** The resource ids of a booking's items (one for a single booking). */
  function itemResources(r) {
    return r.items && r.items.length ? r.items.map((i) => i.resource_id) : [r.resource_id];
  }

  /** What the person books with the chosen resource: `{resource_id}` or `{pool_id}`,
   *  from "Together with"; `null` for the resource alone. */
  function together() {
    const [kind, id] = (state.with || '').split(':');
    if (kind === 'resource' && state.resources.some((r) => r.id === id)) return { resource_id: id };
    if (kind === 'pool' && state.pools.some((p) => p.id === id)) return { pool_id: id };
    return null;
  }

  /** The other item of a booking together, as the slots read names it. */
  function withQuery(item) {
    return item.resource_id ? 'resource_id=' + item.resource_id : 'pool_id=' + item.pool_id;
  }

  function togetherName() {
    const t = together();
    if (!t) return '';
    if (t.resource_id) return nameOf(t.resource_id);
    const pool = state.pools.find((p) => p.id === t.pool_id);
    return 'any free one of ' + (pool ? pool.name : 'a pool');
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

  // ---- the times of the week ---------------------------------------------------

  function current() {
    return state.resources.find((r) => r.id === state.resourceId) || null;
  }

  /** The length a resource offers first: its own default, else its grid's step, else an hour. */
  function defaultLength(resource) {
    return resource.default_duration_minutes || resource.slot_minutes || 60;
  }

  function chosenLength(resource) {
    return state.lengths[resource.id] || defaultLength(resource);
  }

  function lengthText(minutes) {
    const h = Math.floor(minutes / 60), m = minutes % 60;
    if (!h) return m + ' min';
    return h + ' h' + (m ? ' ' + m + ' min' : '');
  }

  /** The length picker of `resource`: the usual lengths, its default and its grid. */
  function fillLengths(resource) {
    const select = $('duration');
    const chosen = chosenLength(resource);
    const all = new Set(LENGTHS.concat([defaultLength(resource), chosen]));
    if (resource.slot_minutes) all.add(resource.slot_minutes);
    select.textContent = '';
    for (const m of [...all].filter((m) => m > 0 && m <= 1440).sort((a, b) => a - b)) {
      select.append(el('option', { value: m, text: lengthText(m) + (m === defaultLength(resource) ? ' (usual)' : '') }));
    }
    select.value = String(chosen);
    $('places').textContent = resource.capacity > 1 ? resource.capacity + ' places at a time' : '';
  }

  const WORDS = {
    free: ['Free', 'free, press to hold'],
    past: ['Past', 'past'],
    closed: ['Closed', 'closed'],
    notice: ['Too soon', 'too soon to book'],
    advance: ['Too far ahead', 'too far ahead to book'],
    buffer: ['Kept free', 'kept free around a booking'],
    limit: ['Limit reached', 'your booking limit for this period is reached'],
    apart: ['Not together', 'not free together'],
    taken: ['Booked', 'booked; press to join the waitlist'],
    held: ['Held', 'held by someone; press to join the waitlist'],
    mine: ['Yours', 'booked by you'],
    'mine-held': ['Your hold', 'your hold, expires in'],
  };

  /** What one start is for this person now, and what a press on it does. */
  function judge(resource, cell, taken, mine) {
    const overlaps = (x) => x.s < cell.end && cell.start < x.e;
    const own = mine.find((r) => r.s === cell.start) || mine.find(overlaps);
    let kind;
    if (own && !(state.moving && state.moving.id === own.id && own.s !== cell.start)) {
      kind = own.status === 'HELD' ? 'mine-held' : 'mine';
    } else if (!cell.reason) {
      kind = 'free';
    } else if (cell.reason === 'taken') {
      kind = taken.some((t) => t.status === 'HELD' && t.expires_at && overlaps(t)) ? 'held' : 'taken';
    } else {
      kind = cell.reason;
    }
    const [text, words] = WORDS[kind];
    const out = { kind, text: [text], label: words, action: null };
    if (kind === 'free' && resource.capacity > 1) {
      out.text = [cell.remaining + ' left'];
      out.label = cell.remaining + ' of ' + resource.capacity + ' places left, press to hold';
    }
    if (kind === 'mine-held') out.text = ['Your hold ', countdown(own.expires_at)];
    if (kind === 'held') {
      const soonest = taken.filter((t) => t.status === 'HELD' && t.expires_at && overlaps(t)).map((t) => t.expires_at).sort()[0];
      out.text = ['Held ', countdown(soonest)];
    }
    if (kind === 'apart') out.label = 'not free together with ' + togetherName();
    if (kind === 'notice' && resource.min_notice_minutes) out.label = 'too soon: bookings need ' + lengthText(resource.min_notice_minutes) + ' notice';
    if (kind === 'advance' && resource.max_advance_days) out.label = 'too far ahead: bookings open ' + resource.max_advance_days + ' days ahead';

    const moving = state.moving && state.moving.resource_id === resource.id ? state.moving : null;
    if (moving) {
      // The moved booking's own time and buffers may be all that stands in the way:
      // those starts are offered too, and the move itself decides.
      const reach = (resource.buffer_before_minutes + resource.buffer_after_minutes) * 60000 + (cell.end - cell.start);
      const near = cell.start < Date.parse(moving.end) + reach && Date.parse(moving.start) - reach < cell.end;
      if (kind === 'free' || ((kind === 'buffer' || kind === 'taken' || kind === 'mine') && near && cell.start !== Date.parse(moving.start))) {
        out.action = () => moveTo(resource, cell);
        out.label = (kind === 'free' ? 'free' : out.label.split(';')[0]) + ', press to move your booking here';
      }
    } else if (kind === 'free') {
      // Decided at the press: a move begun since this was drawn moves, never holds.
      out.action = () => (state.moving && state.moving.resource_id === resource.id ? moveTo(resource, cell) : hold(resource, cell));
    } else if (kind === 'taken' || kind === 'held') {
      out.action = () => joinWaitlist(resource, cell);
    } else if (kind === 'mine-held') {
      out.action = () => { state.holdId = own.id; state.holdSeen = true; showHold(); $('confirm').focus(); };
    }
    return out;
  }

  /** Draws the week read: the day picker, and per day its times, one row per time of
   *  day that is open on some day of the week. `data-resource`, `data-week` (0 = this
   *  one) and `data-length` on #calendar then say what is shown. */
  function paint(resource, days, slots) {
    const zone = resource.time_zone || 'UTC';
    const dayStarts = days.map((d) => wallToInstant(d.y, d.m, d.d, 0, zone));
    const taken = slots.taken.map((t) => Object.assign({ s: Date.parse(t.start), e: Date.parse(t.end) }, t));
    const mine = state.mine
      .filter((r) => itemResources(r).includes(resource.id))
      .map((r) => Object.assign({ s: Date.parse(r.start), e: Date.parse(r.end) }, r));
    // Booking together, a start free here but not for the other (or any of the pool)
    // is 'apart': not free together.
    const entries = slots.slots.map((s) => ({ start: Date.parse(s.start), end: Date.parse(s.end), remaining: s.remaining,
      reason: slots.together && !slots.together.has(Date.parse(s.start)) ? 'apart' : null }))
      .concat(slots.unavailable.map((u) => ({ start: Date.parse(u.start), end: Date.parse(u.end), reason: u.reason })))
      .sort((a, b) => a.start - b.start);
    const perDay = days.slice(0, 7).map(() => new Map());
    const rows = new Map();
    for (const cell of entries) {
      const day = dayStarts.findIndex((s, i) => i < 7 && s <= cell.start && cell.start < dayStarts[i + 1]);
      if (day < 0) continue;
      const p = zoneParts(cell.start, zone);
      let key = String(p.hour).padStart(2, '0') + ':' + String(p.minute).padStart(2, '0');
      // The hour a fall-back night has twice: its second start gets a row of its own.
      if (perDay[day].has(key)) key += ' (2nd)';
      Object.assign(cell, { day, key, hour: p.hour, minute: p.minute });
      perDay[day].set(key, cell);
      // A row is drawn when some day of the week has something at that time other than
      // closed or past: before the first time that can still be booked, a week that is
      // partly over draws no rows of 'Past'.
      if (cell.reason !== 'closed' && cell.reason !== 'past') rows.set(key, p.hour * 60 + p.minute + (key.length > 5 ? 0.5 : 0));
    }
    const moving = state.moving && state.moving.resource_id === resource.id ? state.moving : null;
    const order = [...rows.keys()].sort((a, b) => rows.get(a) - rows.get(b));
    const bookable = perDay.map((m) => [...m.values()].some((c) => !c.reason));
    if (state.day === null) {
      const now = Date.now();
      const today = dayStarts.findIndex((s, i) => i < 7 && s <= now && now < dayStarts[i + 1]);
      const firstFree = bookable.indexOf(true);
      state.day = today >= 0 && bookable[today] ? today : firstFree >= 0 ? firstFree : Math.max(0, today);
    }

    // Keyboard focus survives a redraw: the same start (or day) is focused again.
    const focused = document.activeElement;
    const refocus = focused && focused.closest && focused.closest('#calendar, #days')
      ? (focused.dataset.start ? '[data-start="' + focused.dataset.start + '"]' : '#' + focused.id) : null;

    const picker = $('days');
    picker.textContent = '';
    for (let i = 0; i < 7; i++) {
      // The name a screen reader reads begins with the words shown ("Tue 8"), so a
      // person who speaks what they see reaches the button (WCAG 2.5.3, Label in Name);
      // the rest is for the ear only.
      const more = ', ' + fmt(dayStarts[i], zone, { weekday: 'long', day: 'numeric', month: 'long' }) + (bookable[i] ? '' : ', no free times');
      picker.append(el('button', {
        type: 'button', id: 'day-' + i, 'data-day': i, 'aria-pressed': String(i === state.day),
        class: bookable[i] ? '' : 'no-times',
        onclick: () => { state.day = i; paint(resource, days, slots); },
      }, el('span', { class: 'line', text: DAY_NAMES[i] }), ' ', el('span', { class: 'line', text: String(days[i].d) }),
      el('span', { class: 'sr-only', text: more })));
    }

    const week = $('calendar');
    week.textContent = '';
    for (let i = 0; i < 7; i++) {
      const title = fmt(dayStarts[i], zone, { weekday: 'short', day: 'numeric', month: 'short' });
      const column = el('section', { class: 'day' + (i === state.day ? ' chosen' : ''), 'data-day': i, 'aria-labelledby': 'day-title-' + i },
        el('h3', { id: 'day-title-' + i, text: title }));
      const list = el('ol', {});
      let any = false;
      for (const key of order) {
        const cell = perDay[i].get(key);
        if (!cell) {
          list.append(el('li', { class: 'gap', 'aria-hidden': 'true' }));
          continue;
        }
        any = true;
        const j = judge(resource, cell, taken, mine);
        const attrs = {
          type: 'button', class: 'slot cell-' + ({ 'mine-held': 'mine', past: 'closed', notice: 'closed', advance: 'closed', apart: 'closed' }[j.kind] || j.kind),
          'data-day': i, 'data-time': key, 'data-start': new Date(cell.start).toISOString(), 'data-end': new Date(cell.end).toISOString(),
          'data-state': j.kind, disabled: !j.action,
        };
        if (cell.minute === 0 && key.length === 5) attrs['data-hour'] = cell.hour;
        // Read as what it shows, its time then its state ("09:30 Free"), then for the
        // ear its day, its end and what a press does (WCAG 2.5.3, Label in Name).
        const heard = ', ' + fmt(cell.start, zone, { weekday: 'long', day: 'numeric', month: 'long' }) + ', until ' +
          fmt(cell.end, zone, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }) + ': ' + j.label;
        const button = el('button', attrs, el('span', { class: 'time', text: key.slice(0, 5) }), ' ',
          el('span', { class: 'say' }, ...j.text), el('span', { class: 'sr-only', text: heard }));
        if (j.action) button.addEventListener('click', j.action);
        list.append(el('li', {}, button));
      }
      if (!any || !order.length) {
        list.textContent = '';
        const over = [...perDay[i].values()].some((c) => c.reason === 'past');
        list.append(el('li', { class: 'none', text: over ? 'Nothing left to book this day.' : 'Closed all day.' }));
      }
      column.append(list);
      week.append(column);
    }
    if (refocus) {
      const again = document.querySelector('#calendar ' + refocus + ', #days ' + refocus);
      if (again && !again.disabled) again.focus();
    }
    $('week-label').textContent = fmt(dayStarts[0], zone, { day: 'numeric', month: 'short' }) + ' – ' +
      fmt(dayStarts[6], zone, { day: 'numeric', month: 'short', year: 'numeric' });
    $('zone').textContent = 'Times in ' + zone + '.';
    week.dataset.week = String(slots.week);
    week.dataset.resource = resource.id;
    week.dataset.length = String(chosenLength(resource));
    week.dataset.day = String(state.day);
    week.dataset.moving = moving ? moving.id : '';
  }

  // ---- the first view ----------------------------------------------------------

  /** Shows the week and day of the first start that can be booked on the chosen
   *  resource at the chosen length (together with the other one, when one is chosen),
   *  within the 62 days one slots read spans; the current week when there is none.
   *  While it reads, the calendar is not drawn, so the first week drawn is this one. A
   *  week the person stepped to since is kept. */
  async function placeAtFirstFree() {
    const resource = current();
    if (!resource || !state.who) return;
    const length = chosenLength(resource);
    const withItem = together();
    const token = (state.placing = {});
    try {
      const from = Date.now();
      const w = 'from=' + encodeURIComponent(new Date(from).toISOString()) +
        '&to=' + encodeURIComponent(new Date(from + 62 * 86400000).toISOString());
      const path = withItem
        ? 'v1/slots?resource_id=' + resource.id + '&' + withQuery(withItem) + '&together=true&'
        : 'v1/resources/' + resource.id + '/slots?';
      const r = await api('GET', path + w + '&duration=PT' + length + 'M');
      const still = state.placing === token && current() === resource && chosenLength(resource) === length &&
        JSON.stringify(together()) === JSON.stringify(withItem);
      if (!still || r.status !== 200 || !r.body.slots.length) return;
      const zone = resource.time_zone || 'UTC';
      const p = zoneParts(Date.parse(r.body.slots[0].start), zone);
      const n = zoneParts(Date.now(), zone);
      const weekday = (d) => (d.getUTCDay() + 6) % 7;
      const firstDate = new Date(Date.UTC(p.year, p.month - 1, p.day));
      const today = new Date(Date.UTC(n.year, n.month - 1, n.day));
      const mondays = (firstDate - weekday(firstDate) * 86400000) - (today - weekday(today) * 86400000);
      state.weekOffset = Math.round(mondays / (7 * 86400000));
      state.day = weekday(firstDate);
    } finally {
      if (state.placing === token) state.placing = null;
    }
  }

  // ---- actions -----------------------------------------------------------------

  async function hold(resource, cell) {
    const withItem = together();
    if ($('repeat-weekly').checked && !withItem) return holdWeekly(resource, cell);
    const zone = resource.time_zone || 'UTC';
    const start = new Date(cell.start).toISOString(), end = new Date(cell.end).toISOString();
    say('Holding ' + when(start, end, zone) + (withItem ? ' with ' + togetherName() : '') + '…');
    // Together: one booking of both items, held in one transaction or not at all.
    const body = withItem ? { items: [{ resource_id: resource.id }, withItem], start, end } : { resource_id: resource.id, start, end };
    const r = await api('POST', 'v1/reservations', body, true);
    if (r.status === 201 || r.status === 202) {
      state.holdId = r.body.id;
      state.holdSeen = true;
      state.mine = [r.body].concat(state.mine.filter((x) => x.id !== r.body.id));
      say('Held ' + namesOf(r.body) + ', ' + when(start, end, zone) + ' for you. Confirm it before the countdown ends.', 'ok');
      showHold();
    } else if (r.status === 409 && String(r.body && r.body.type).endsWith('/slot-unavailable')) {
      say('Just taken: someone else got ' + when(start, end, zone) + ' a moment ago. The calendar is refreshed.', 'error');
    } else {
      say(explain(r.body), 'error');
    }
    await refresh();
  }

  /** "Repeat weekly": the start pressed and the same local time each week after it, as
   *  one series (`POST /v1/series`). Weeks already taken are skipped and named; the
   *  first week held becomes the hold shown, and its Confirm confirms every week. */
  async function holdWeekly(resource, cell) {
    const zone = resource.time_zone || 'UTC';
    const start = new Date(cell.start).toISOString(), end = new Date(cell.end).toISOString();
    const weeks = Number($('repeat-count').value) || 4;
    say('Holding ' + when(start, end, zone) + ' and the ' + (weeks - 1) + ' weeks after it…');
    const body = { resource_id: resource.id, start, end, recurrence: 'FREQ=WEEKLY;COUNT=' + weeks, mode: 'skip_conflicts' };
    const r = await api('POST', 'v1/series', body, true);
    if (r.status === 201) {
      const held = r.body.occurrences.filter((o) => o.reservation_id);
      const missed = r.body.occurrences.filter((o) => !o.reservation_id);
      state.holdId = held[0].reservation_id;
      state.holdSeen = true;
      let text = 'Held ' + held.length + ' of ' + weeks + ' weeks from ' + when(held[0].start, held[0].end, zone) + '.';
      if (missed.length) text += ' Not held: ' + missed.map((o) => when(o.start, o.end, zone) + ' (' + (o.problem && o.problem.title ? o.problem.title.toLowerCase() : 'refused') + ')').join(', ') + '.';
      say(text + ' Confirm them before the countdown ends.', 'ok');
    } else if (r.status === 409 && String(r.body && r.body.type).endsWith('/slot-unavailable')) {
      say('Every one of those ' + weeks + ' weeks is taken. The calendar is refreshed.', 'error');
    } else {
      say(explain(r.body), 'error');
    }
    await refresh();
    showHold();
  }

  async function confirmReservation(id) {
    const held = state.mine.find((r) => r.id === id);
    if (held && held.series_id) {
      // A hold of a series confirms every week of it still held.
      const r = await api('POST', 'v1/reservations/' + id + '/confirm?scope=all', undefined, true);
      if (r.status === 200 && r.body.occurrences) {
        const confirmed = r.body.occurrences.filter((o) => o.status === 'CONFIRMED').length;
        say('Confirmed ' + confirmed + ' weekly times: ' + nameOf(held.resource_id) + ', from ' + when(held.start, held.end, zoneOf(held.resource_id)) + '.', 'ok');
      } else {
        say(explain(r.body), 'error');
      }
      await refresh();
      return;
    }
    const r = await api('POST', 'v1/reservations/' + id + '/confirm', undefined, true);
    if (r.status === 200 || r.status === 202) {
      const what = when(r.body.start, r.body.end, zoneOf(r.body.resource_id));
      if (r.body.status === 'CONFIRMED') say('Confirmed: ' + namesOf(r.body) + ', ' + what + '.', 'ok');
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
      say((r.body.status === 'RELEASED' ? 'Released ' : 'Cancelled ') + namesOf(r.body) + ', ' + what + '.', 'ok');
      if (state.moving && state.moving.id === id) stopMoving();
    } else {
      say(verb + ' failed. ' + explain(r.body), 'error');
    }
    await refresh();
  }

  /** Starts moving `r`: the times shown are of its own length, and a press on one moves it. */
  function startMoving(r) {
    state.moving = r;
    const minutes = Math.round((Date.parse(r.end) - Date.parse(r.start)) / 60000);
    state.lengths[r.resource_id] = minutes;
    if (state.resourceId !== r.resource_id) {
      state.resourceId = r.resource_id;
      $('resource').value = r.resource_id;
      state.day = null;
    }
    const resource = current();
    if (resource) fillLengths(resource);
    $('move-what').textContent = 'Moving ' + nameOf(r.resource_id) + ', ' + when(r.start, r.end, zoneOf(r.resource_id)) +
      ': pick a new start.';
    $('move-banner').hidden = false;
    say('Pick a new start for your booking.', 'ok');
    $('move-stop').focus();
    refresh();
  }

  function stopMoving() {
    state.moving = null;
    $('move-banner').hidden = true;
  }

  async function moveTo(resource, cell) {
    const r = state.moving;
    const zone = resource.time_zone || 'UTC';
    const start = new Date(cell.start).toISOString(), end = new Date(cell.end).toISOString();
    say('Moving to ' + when(start, end, zone) + '…');
    const answer = await api('PATCH', 'v1/reservations/' + r.id, { start, end }, true);
    if (answer.status === 200) {
      stopMoving();
      say('Moved: ' + nameOf(resource.id) + ', now ' + when(answer.body.start, answer.body.end, zone) + '.', 'ok');
    } else if (answer.status === 409 && String(answer.body && answer.body.type).endsWith('/slot-unavailable')) {
      say('That time is taken: ' + when(start, end, zone) + ' stays as it was; pick another.', 'error');
    } else {
      say('Not moved. ' + explain(answer.body), 'error');
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
    panel.hidden = !held;
    document.body.classList.toggle('holding', !!held);
    if (!held) return;
    $('hold-what').textContent = namesOf(held) + ', ' + when(held.start, held.end, zoneOf(held.resource_id), zonesMixed(itemResources(held)));
    const c = $('hold-countdown');
    c.dataset.expires = held.expires_at;
    c.textContent = countdownText(held.expires_at);
  }

  /** "My reservations": soonest first, each in its resource's zone, named when the
   *  list holds more than one zone or another than the calendar's. */
  function renderMine() {
    const list = $('mine');
    list.textContent = '';
    if (!state.mine.length) list.append(el('li', { class: 'muted', text: 'Nothing booked yet.' }));
    const named = zonesMixed(state.mine.flatMap(itemResources));
    const soonest = [...state.mine].sort((a, b) => Date.parse(a.start) - Date.parse(b.start) || (a.id < b.id ? -1 : 1));
    for (const r of soonest) {
      const what = namesOf(r) + ', ' + when(r.start, r.end, zoneOf(r.resource_id), named);
      const item = el('li', { 'data-id': r.id, 'data-status': r.status });
      const text = el('span', { class: 'what' }, what + ' · ');
      const moveButton = el('button', { type: 'button', class: 'move', text: 'Move', 'aria-label': 'Move ' + what, onclick: orWhy(() => startMoving(r)) });
      if (r.status === 'HELD') {
        text.append(r.source === 'waitlist_offer' ? 'offered, ' : 'held, ', countdown(r.expires_at), ' left');
        item.append(text,
          el('button', { type: 'button', class: 'primary', text: 'Confirm', 'aria-label': 'Confirm ' + what, onclick: () => confirmReservation(r.id) }),
          moveButton,
          el('button', { type: 'button', class: 'cancel', text: 'Release', 'aria-label': 'Release ' + what, onclick: () => cancelReservation(r.id, 'Release') }));
      } else {
        text.append(r.status === 'CONFIRMED' ? 'confirmed' : 'confirming');
        // The resource's deadlines, said in words beside the buttons they close.
        const closed = (minutes) => !state.admin && minutes != null && Date.now() > Date.parse(r.start) - minutes * 60000;
        const res = state.resources.find((x) => x.id === r.resource_id) || {};
        const confirming = r.status !== 'CONFIRMED';
        const moveClosed = !confirming && closed(res.reschedule_notice_minutes);
        const cancelClosed = !confirming && closed(res.cancel_notice_minutes);
        const cancelButton = el('button', { type: 'button', class: 'cancel', text: 'Cancel', 'aria-label': 'Cancel ' + what, onclick: orWhy(() => cancelReservation(r.id, 'Cancel')) });
        item.append(text, moveButton, cancelButton);
        const why = [];
        if (confirming) why.push('moving and cancelling open once it is confirmed');
        if (cancelClosed) why.push('cancelling closed ' + lengthText(res.cancel_notice_minutes) + ' before the start');
        if (moveClosed) why.push('moving closed ' + lengthText(res.reschedule_notice_minutes) + ' before the start');
        if (why.length) {
          const note = el('span', { class: 'muted why', id: 'why-' + r.id, text: why.join('; ') });
          item.append(note);
          if (confirming || cancelClosed) unavailable(cancelButton, note);
          if (confirming || moveClosed) unavailable(moveButton, note);
        }
      }
      list.append(item);
    }
  }

  async function refreshWaits() {
    const list = $('waits');
    // The caller's own entries, from the server: the same in every browser.
    const r = await api('GET', 'v1/waitlist?limit=100');
    if (r.status !== 200) return;
    list.textContent = '';
    let shown = 0;
    const named = zonesMixed(r.body.items.map((e) => e.resource_id));
    for (const e of r.body.items) {
      const id = e.id;
      const zone = zoneOf(e.resource_id);
      const what = nameOf(e.resource_id) + ', ' + when(e.start, e.end, zone, named);
      const before = state.waitStatus[id];
      state.waitStatus[id] = e.status;
      const item = el('li', { 'data-id': id, 'data-status': e.status });
      if (e.status === 'WAITING') {
        shown++;
        item.append(el('span', { class: 'what', text: what + ' · waiting, position ' + e.position + (e.position === 1 ? ' (next in line)' : '') }),
          el('button', { type: 'button', text: 'Leave', 'aria-label': 'Leave the waitlist for ' + what, onclick: () => leaveWaitlist(id) }));
      } else if (e.status === 'OFFERED') {
        shown++;
        if (before !== 'OFFERED') say('An offer arrived: ' + what + ' is held for you. Accept it before it lapses.', 'ok');
        const offer = state.mine.find((x) => x.id === e.reservation_id);
        const text = el('span', { class: 'what' }, what + ' · offered to you');
        if (offer && offer.expires_at) text.append(', ', countdown(offer.expires_at), ' left');
        item.append(text,
          el('button', { type: 'button', class: 'primary', id: 'accept-offer', text: 'Accept', 'aria-label': 'Accept the offer of ' + what, onclick: () => confirmReservation(e.reservation_id) }),
          el('button', { type: 'button', text: 'Decline', 'aria-label': 'Decline the offer of ' + what, onclick: () => leaveWaitlist(id) }));
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
    if (!state.admin || !$('admin').open || !resource) return;
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

  // ---- webhook deliveries ------------------------------------------------------

  /** The admin panel's delivery log: the endpoints to choose from, and the chosen
   *  one's latest attempts, newest first, each with its answer or why there was none. */
  async function refreshDeliveries() {
    if (!state.admin || !$('admin').open) return;
    const select = $('webhook');
    const list = $('deliveries');
    const endpoints = await api('GET', 'v1/webhooks?limit=100');
    if (endpoints.status !== 200) {
      list.replaceChildren(el('li', { class: 'muted', text: explain(endpoints.body) }));
      return;
    }
    const chosen = select.value;
    select.replaceChildren(...endpoints.body.items.map((w) => el('option', {
      value: w.id,
      text: w.url + (w.disabled_at ? ' (disabled)' : ''),
    })));
    if (endpoints.body.items.some((w) => w.id === chosen)) select.value = chosen;
    if (!select.value) {
      list.replaceChildren(el('li', { class: 'muted', text: 'No webhook endpoints.' }));
      return;
    }
    const log = await api('GET', 'v1/webhooks/' + select.value + '/deliveries?limit=' + DELIVERIES_SHOWN);
    if (log.status !== 200) {
      list.replaceChildren(el('li', { class: 'muted', text: explain(log.body) }));
      return;
    }
    if (!log.body.items.length) {
      list.replaceChildren(el('li', { class: 'muted', text: 'Nothing sent yet.' }));
      return;
    }
    $('deliveries-zone').textContent = 'Times in ' + zoneName(BROWSER_ZONE) + ', the zone of this browser.';
    list.replaceChildren(...log.body.items.map((a) => {
      const time = (t) => fmt(Date.parse(t), BROWSER_ZONE, { day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
      const accepted = a.status_code !== null && a.status_code >= 200 && a.status_code < 300;
      const answer = a.status_code !== null ? 'HTTP ' + a.status_code : 'no answer';
      let text = a.event_type + ' · try ' + a.attempt + (a.trigger === 'queue' ? '' : ' (' + a.trigger + ')') +
        ' · ' + time(a.attempted_at) + ' · ' + answer + ' in ' + a.duration_ms + ' ms';
      if (a.error) text += ': ' + a.error;
      if (a.next_attempt_at) text += ' · next try ' + time(a.next_attempt_at);
      return el('li', { 'data-id': a.id, 'data-event': a.event_id, 'data-outcome': accepted ? 'accepted' : 'failed' },
        el('span', { class: 'what', text }),
        el('span', { class: 'badge ' + (accepted ? 'ok' : 'error'), text: accepted ? 'accepted' : 'failed' }));
    }));
  }

  // ---- the admin's settings ----------------------------------------------------

  const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

  function rangesText(ranges) {
    return (ranges || []).map((r) => r[0] + '-' + r[1]).join(', ');
  }

  /** "09:00-12:00, 13:00-17:00" as the API's ranges; `null` when it does not read. */
  function readRanges(text) {
    const out = [];
    for (const part of text.split(',').map((p) => p.trim()).filter(Boolean)) {
      const m = /^(\d{1,2}):(\d{2})\s*[-–]\s*(\d{1,2}):(\d{2})$/.exec(part);
      if (!m) return null;
      out.push([m[1].padStart(2, '0') + ':' + m[2], m[3].padStart(2, '0') + ':' + m[4]]);
    }
    return out;
  }

  function buildHours() {
    const box = $('set-hours');
    for (const [i, day] of WEEKDAYS.entries()) {
      box.append(el('label', {}, DAY_NAMES[i] + ' ', el('input', { id: 'set-hours-' + day, placeholder: 'closed', autocomplete: 'off' })));
    }
  }

  /** "2 per day, 1 per 240 minutes" of the API's `limits`. */
  function limitsText(limits) {
    return (limits || []).map((l) => l.max + ' per ' + (l.window === 'rolling' ? l.rolling_minutes + ' minutes' : l.window)).join('\n');
  }

  /** The resource form shows `resource` as read; not redrawn by the polling, so an
   *  admin's edits stay until saved, and not at all while it makes a new one. */
  function fillSettings(resource) {
    if (!resource || state.settingsFor === resource.id || $('settings').dataset.mode === 'new') return;
    state.settingsFor = resource.id;
    clearFieldErrors();
    const num = (v) => (v === null || v === undefined ? '' : String(v));
    $('set-name').value = resource.name;
    $('set-capacity').value = num(resource.capacity);
    $('set-zone').value = resource.time_zone || 'UTC';
    $('set-ttl').value = num(resource.hold_ttl_seconds);
    $('set-offer-ttl').value = num(resource.offer_ttl_seconds);
    $('set-always-open').checked = !resource.schedule;
    const weekly = (resource.schedule && resource.schedule.weekly) || {};
    for (const day of WEEKDAYS) {
      $('set-hours-' + day).value = resource.schedule ? rangesText(weekly[day]) : '';
      $('set-hours-' + day).disabled = !resource.schedule;
    }
    $('set-exceptions').value = ((resource.schedule && resource.schedule.exceptions) || [])
      .map((e) => e.date + ' ' + (e.hours.length ? rangesText(e.hours) : 'closed')).join('\n');
    $('set-buffer-before').value = num(resource.buffer_before_minutes);
    $('set-buffer-after').value = num(resource.buffer_after_minutes);
    $('set-notice').value = num(resource.min_notice_minutes);
    $('set-advance').value = num(resource.max_advance_days);
    $('set-grid').value = num(resource.slot_minutes);
    $('set-default-duration').value = num(resource.default_duration_minutes);
    $('set-cancel-notice').value = num(resource.cancel_notice_minutes);
    $('set-reschedule-notice').value = num(resource.reschedule_notice_minutes);
    $('set-max-reschedules').value = num(resource.max_reschedules);
    $('set-max-hold').value = num(resource.max_hold_seconds);
    $('set-limits').value = limitsText(resource.limits);
  }

  /** The form as a blank new resource (`mode` 'new'), or back to the chosen one. */
  function settingsMode(mode) {
    const form = $('settings');
    form.dataset.mode = mode;
    clearFieldErrors();
    $('settings-title').textContent = mode === 'new' ? 'New resource' : 'This resource';
    $('save-settings').textContent = mode === 'new' ? 'Create' : 'Save';
    $('new-cancel').hidden = mode !== 'new';
    $('archive').hidden = mode === 'new';
    $('new-resource').hidden = mode === 'new';
    if (mode === 'new') {
      for (const input of form.querySelectorAll('input:not([type=checkbox]), textarea')) input.value = '';
      $('set-capacity').value = '1';
      $('set-zone').value = 'UTC';
      $('set-ttl').value = '300';
      $('set-always-open').checked = true;
      for (const day of WEEKDAYS) $('set-hours-' + day).disabled = true;
      $('set-name').focus();
    } else {
      state.settingsFor = '';
      fillSettings(current());
    }
  }

  /** The input an API field error names (`time_zone`, `schedule.weekly.tue[0]`,
   *  `limits[1].max`). */
  const FIELD_INPUTS = {
    name: 'set-name', capacity: 'set-capacity', time_zone: 'set-zone', hold_ttl_seconds: 'set-ttl',
    offer_ttl_seconds: 'set-offer-ttl', buffer_before_minutes: 'set-buffer-before',
    buffer_after_minutes: 'set-buffer-after', min_notice_minutes: 'set-notice', max_advance_days: 'set-advance',
    slot_minutes: 'set-grid', default_duration_minutes: 'set-default-duration',
    cancel_notice_minutes: 'set-cancel-notice', reschedule_notice_minutes: 'set-reschedule-notice',
    max_reschedules: 'set-max-reschedules', max_hold_seconds: 'set-max-hold', limits: 'set-limits',
  };
  function inputOfField(field) {
    const head = String(field).split(/[.[]/)[0];
    if (head === 'schedule') {
      const day = /weekly\.(mon|tue|wed|thu|fri|sat|sun)/.exec(field);
      if (day) return 'set-hours-' + day[1];
      return /exceptions/.test(field) ? 'set-exceptions' : 'set-hours-mon';
    }
    return FIELD_INPUTS[head] || null;
  }

  /** What a field is called on the form: its label's words before any "(...)". */
  function fieldWords(id) {
    const label = $(id).closest('label');
    const text = label ? label.firstChild.textContent : id;
    return text.split('(')[0].split(',')[0].trim();
  }

  function clearFieldErrors() {
    for (const input of $('settings').querySelectorAll('[aria-invalid]')) {
      input.removeAttribute('aria-invalid');
      input.removeAttribute('aria-describedby');
    }
    for (const note of $('settings').querySelectorAll('.field-error')) note.remove();
  }

  /** Shows `text` beside the input `id`, tied to it for a screen reader. */
  function fieldError(id, text) {
    const input = $(id);
    let note = $('err-' + id);
    if (!note) {
      note = el('span', { class: 'field-error', id: 'err-' + id });
      (input.closest('label') || input).after(note);
    }
    note.textContent = note.textContent ? note.textContent + '; ' + text : text;
    input.setAttribute('aria-invalid', 'true');
    input.setAttribute('aria-describedby', note.id);
  }

  /** Field errors beside their fields (each in words: the field's name, then what is
   *  wrong), focus on the first; the rest, which no field owns, in the message line. */
  function showFieldErrors(errors) {
    clearFieldErrors();
    const loose = [];
    let first = null;
    for (const e of errors) {
      const id = e.id || inputOfField(e.field);
      if (!id || !$(id)) {
        loose.push(e.text || e.message);
        continue;
      }
      fieldError(id, e.text || fieldWords(id) + ' ' + e.message);
      first = first || id;
    }
    const fields = errors.length - loose.length;
    say('Not saved: ' + [fields ? fields + (fields === 1 ? ' field to fix, shown beside it.' : ' fields to fix, each shown beside it.') : '']
      .concat(loose).filter(Boolean).join(' '), 'error');
    if (first) $(first).focus();
  }

  /** "2 per day" lines as the API's `limits`; `null` when a line does not read. */
  function readLimits(text) {
    const out = [];
    for (const line of text.split('\n').map((l) => l.trim()).filter(Boolean)) {
      const m = /^(\d+)\s*(?:per|a|\/)\s*(?:(day|week|month)|(\d+)\s*min(?:ute)?s?)$/i.exec(line);
      if (!m) return null;
      out.push(m[2] ? { max: Number(m[1]), window: m[2].toLowerCase() } : { max: Number(m[1]), window: 'rolling', rolling_minutes: Number(m[3]) });
    }
    return out;
  }

  /** The body of the resource form for `POST` (new) or `PATCH`, or `{errors}` for
   *  what does not read, each with the input it belongs to. */
  function settingsBody(isNew) {
    const optional = (id) => ($(id).value.trim() === '' ? null : Number($(id).value));
    const errors = [];
    const body = {
      name: $('set-name').value,
      capacity: Number($('set-capacity').value),
      time_zone: $('set-zone').value.trim() || 'UTC',
      buffer_before_minutes: Number($('set-buffer-before').value || 0),
      buffer_after_minutes: Number($('set-buffer-after').value || 0),
      min_notice_minutes: Number($('set-notice').value || 0),
      max_advance_days: optional('set-advance'),
      slot_minutes: optional('set-grid'),
      default_duration_minutes: optional('set-default-duration'),
      cancel_notice_minutes: optional('set-cancel-notice'),
      reschedule_notice_minutes: optional('set-reschedule-notice'),
      max_reschedules: optional('set-max-reschedules'),
      max_hold_seconds: optional('set-max-hold'),
      schedule: null,
    };
    // The hold and offer times have no "none": empty keeps the service's default.
    if (optional('set-ttl') !== null) body.hold_ttl_seconds = optional('set-ttl');
    if (optional('set-offer-ttl') !== null) body.offer_ttl_seconds = optional('set-offer-ttl');
    const limits = readLimits($('set-limits').value);
    if (limits) body.limits = limits;
    else errors.push({ id: 'set-limits', text: 'Booking limits: write each as 2 per day, 3 per week, 5 per month or 1 per 240 minutes.' });
    if (!$('set-always-open').checked) {
      const weekly = {};
      for (const [i, day] of WEEKDAYS.entries()) {
        const ranges = readRanges($('set-hours-' + day).value);
        if (!ranges) errors.push({ id: 'set-hours-' + day, text: 'Opening hours on ' + DAY_NAMES[i] + ': write them as 09:00-17:00, or leave the day empty for closed.' });
        else if (ranges.length) weekly[day] = ranges;
      }
      const exceptions = [];
      for (const line of $('set-exceptions').value.split('\n').map((l) => l.trim()).filter(Boolean)) {
        const m = /^(\d{4}-\d{2}-\d{2})\s+(.*)$/.exec(line);
        const hours = m && (/^closed$/i.test(m[2].trim()) ? [] : readRanges(m[2]));
        if (!m || !hours) errors.push({ id: 'set-exceptions', text: 'Exception "' + line + '": write it as 2027-12-24 09:00-12:00, or 2027-12-25 closed.' });
        else exceptions.push({ date: m[1], hours });
      }
      body.schedule = { weekly, exceptions };
    }
    if (isNew) {
      // A new resource has no rule to clear: what is empty is left out.
      for (const [k, v] of Object.entries(body)) if (v === null) delete body[k];
      if (body.limits && !body.limits.length) delete body.limits;
    }
    return errors.length ? { errors } : body;
  }

  /** Saves the resource form: makes a new resource or changes the chosen one. */
  async function saveSettings() {
    const isNew = $('settings').dataset.mode === 'new';
    const resource = current();
    if (!isNew && !resource) return;
    const body = settingsBody(isNew);
    if (body.errors) {
      showFieldErrors(body.errors);
      return;
    }
    const r = isNew
      ? await api('POST', 'v1/resources', body, true)
      : await api('PATCH', 'v1/resources/' + resource.id, body, true);
    if (r.status === 200 || r.status === 201) {
      clearFieldErrors();
      if (isNew) {
        state.resourceId = r.body.id;
        state.day = null;
        $('settings').dataset.mode = 'edit';
        settingsMode('edit');
        say('Created ' + r.body.name + '.', 'ok');
      } else {
        say('Saved the settings of ' + r.body.name + '.', 'ok');
        delete state.lengths[resource.id];
      }
      state.settingsFor = '';
      await loadResources();
    } else if (Array.isArray(r.body && r.body.errors) && r.body.errors.length) {
      showFieldErrors(r.body.errors);
    } else {
      say('Not saved. ' + explain(r.body), 'error');
    }
    await refresh();
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
    const pools = await api('GET', 'v1/pools?limit=100');
    state.pools = pools.status === 200 ? pools.body.items : [];
    const resource = current();
    if (resource) fillLengths(resource);
    fillTogether();
    if (state.admin) fillSettings(resource);
  }

  /** "Together with": every other resource, and every pool as "Any free one of …". */
  function fillTogether() {
    const select = $('with');
    select.replaceChildren(el('option', { value: '', text: 'Nothing else' }),
      ...state.resources.filter((r) => r.id !== state.resourceId).map((r) => el('option', { value: 'resource:' + r.id, text: r.name })),
      ...state.pools.map((p) => el('option', { value: 'pool:' + p.id, text: 'Any free one of ' + p.name })));
    if (!together() || state.with === 'resource:' + state.resourceId) state.with = '';
    select.value = state.with;
    // A weekly repeat books one resource: it waits while a booking is of several.
    $('repeat-weekly').disabled = !!state.with;
    $('repeat-alone').hidden = !state.with;
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
    if (state.moving) {
      const still = state.mine.find((r) => r.id === state.moving.id);
      if (still) state.moving = still;
      else stopMoving();
    }
    renderMine();
    showHold();
    await refreshWaits();
    if (resource) {
      const zone = resource.time_zone || 'UTC';
      const days = week(zone);
      const from = new Date(wallToInstant(days[0].y, days[0].m, days[0].d, 0, zone)).toISOString();
      const to = new Date(wallToInstant(days[7].y, days[7].m, days[7].d, 0, zone)).toISOString();
      const w = 'from=' + encodeURIComponent(from) + '&to=' + encodeURIComponent(to);
      const length = chosenLength(resource);
      const weekOffset = state.weekOffset;
      const withItem = together();
      const [a, s, g] = await Promise.all([
        api('GET', 'v1/resources/' + resource.id + '/availability?' + w),
        api('GET', 'v1/resources/' + resource.id + '/slots?' + w + '&duration=PT' + length + 'M&unavailable=true'),
        // Together: the starts at which the resource and the other (or some member of
        // the pool) are all free, each under its own rules.
        withItem
          ? api('GET', 'v1/slots?resource_id=' + resource.id + '&' + withQuery(withItem) + '&together=true&' + w + '&duration=PT' + length + 'M')
          : Promise.resolve({ status: 200, body: null }),
      ]);
      // A read of what is no longer asked for (another resource, length or week) is
      // not drawn: the round that follows reads what is.
      const sameWith = JSON.stringify(together()) === JSON.stringify(withItem);
      const still = current() === resource && chosenLength(resource) === length && state.weekOffset === weekOffset &&
        !state.placing && sameWith;
      if (a.status === 200 && s.status === 200 && g.status === 200 && still) {
        const both = g.body ? new Set(g.body.slots.map((x) => Date.parse(x.start))) : null;
        paint(resource, days, { week: weekOffset, taken: a.body.taken, slots: s.body.slots, unavailable: s.body.unavailable || [], together: both });
      } else if (a.status !== 200) say(explain(a.body), 'error');
      else if (s.status !== 200) say(explain(s.body), 'error');
      else if (g.status !== 200) say(explain(g.body), 'error');
      await refreshBookings(resource);
    }
    await refreshDeliveries();
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

  /** Signs in as `who`: a name is checked here first, by the API's own rule, so the
   *  page never sends one the API refuses; then "Signed in" shows only once the API has
   *  taken the name. */
  async function signIn(who) {
    const name = who.trim();
    const problem = IDENTITY === 'bearer' ? (name ? null : 'Paste your access token first.') : nameProblem(name);
    $('who').setAttribute('aria-invalid', String(!!problem));
    if (problem) {
      say(problem, 'error');
      $('who').focus();
      return;
    }
    state.who = name;
    // Only admins may list the webhooks: the answer says whether this is one.
    const probe = await api('GET', 'v1/webhooks?limit=1');
    if (probe.status === 401 || probe.status === 0) {
      state.who = '';
      sessionStorage.removeItem('who');
      $('signed-in').textContent = '';
      $('app').hidden = true;
      $('who').setAttribute('aria-invalid', 'true');
      say('Not signed in. ' + explain(probe.body), 'error');
      return;
    }
    sessionStorage.setItem('who', state.who);
    $('signed-in').textContent = IDENTITY === 'bearer' ? 'Token set.' : 'Signed in as ' + state.who + '.';
    $('app').hidden = false;
    if (/^Type your name|^A name |^Not signed in/.test($('messages').textContent)) say('');
    state.admin = probe.status === 200;
    $('admin').hidden = !state.admin;
    state.settingsFor = '';
    await loadResources();
    await placeAtFirstFree();
    await refresh();
  }

  async function chooseResource(id) {
    state.resourceId = id;
    sessionStorage.setItem('resource', id);
    state.weekOffset = 0;
    state.day = null;
    state.stepped = false;
    fillTogether();
    const resource = current();
    if (resource) fillLengths(resource);
    if (state.admin) fillSettings(resource);
    await placeAtFirstFree();
  }

  function setup() {
    if (IDENTITY === 'bearer') {
      $('who-label').textContent = 'Access token';
      $('who-hint').textContent = 'The token you signed in with elsewhere.';
      $('who').type = 'password';
      $('who').autocomplete = 'off';
    }
    buildHours();
    $('identity').addEventListener('submit', (e) => { e.preventDefault(); signIn($('who').value); });
    $('resource').addEventListener('change', async (e) => { await chooseResource(e.target.value); refresh(); });
    $('with').addEventListener('change', async (e) => {
      state.with = e.target.value;
      fillTogether();
      // Together, the first time both are free may come later: the first view follows
      // it until the person steps to a week of their own.
      if (!state.stepped) await placeAtFirstFree();
      refresh();
    });
    $('duration').addEventListener('change', async (e) => {
      const resource = current();
      if (resource) state.lengths[resource.id] = Number(e.target.value);
      // Another length may first fit later: the first view follows it until the
      // person steps to a week of their own.
      if (!state.stepped) await placeAtFirstFree();
      refresh();
    });
    // A step to another week is the person's: it ends any placing under way.
    const step = (by) => { state.placing = null; state.stepped = true; state.weekOffset += by; state.day = null; refresh(); };
    $('week-prev').addEventListener('click', () => step(-1));
    $('week-next').addEventListener('click', () => step(1));
    $('refresh').addEventListener('click', () => refresh());
    $('confirm').addEventListener('click', () => confirmReservation(state.holdId));
    for (let weeks = 2; weeks <= 12; weeks++) {
      $('repeat-count').append(el('option', { value: weeks, text: weeks + ' weeks' }));
    }
    $('repeat-count').value = '4';
    $('release').addEventListener('click', () => cancelReservation(state.holdId, 'Release'));
    $('move-stop').addEventListener('click', () => { stopMoving(); say('Not moved.'); refresh(); });
    $('admin').addEventListener('toggle', () => refresh());
    $('webhook').addEventListener('change', () => refresh());
    $('set-always-open').addEventListener('change', (e) => {
      for (const day of WEEKDAYS) $('set-hours-' + day).disabled = e.target.checked;
    });
    $('settings').addEventListener('submit', (e) => { e.preventDefault(); saveSettings(); });
    $('new-resource').addEventListener('click', () => settingsMode('new'));
    $('new-cancel').addEventListener('click', () => { settingsMode('edit'); $('new-resource').focus(); });
    $('archive').addEventListener('click', async () => {
      const resource = current();
      if (!resource) return;
      const r = await api('DELETE', 'v1/resources/' + resource.id);
      if (r.status === 200) {
        say('Archived ' + resource.name + ': it takes no new bookings; its bookings stay.', 'ok');
        state.resourceId = '';
        state.settingsFor = '';
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
