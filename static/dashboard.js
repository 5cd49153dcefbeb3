// zkgate dashboard: keeps the page live over /ws. Plain JavaScript, no build
// step, no dependencies. The server pushes HTML fragments rendered by the
// same templ components as the page (already escaped); this script only
// swaps them in by id and counts times in the browser. Long lists are
// filtered and paged by the gateway (?q=, ?after=).
(function () {
  'use strict';

  var body = document.body;
  var page = body.dataset.page;
  var skew = body.dataset.now ? Number(body.dataset.now) - Date.now() : 0; // server clock minus ours
  var userOpen = Object.create(null); // details id -> open, as the user left it
  var AUTO_OPEN = 12; // lists this short show their trees open

  function now() { return Date.now() + skew; }

  function pad(n) { return n < 10 ? '0' + n : String(n); }

  function duration(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + 's';
    var m = Math.floor(s / 60);
    if (m < 60) return m + 'm ' + pad(s % 60) + 's';
    var h = Math.floor(m / 60);
    if (h < 48) return h + 'h ' + pad(m % 60) + 'm';
    return Math.floor(h / 24) + 'd ' + (h % 24) + 'h';
  }

  // tick rewrites every relative time; the server sends absolute ones.
  function tick() {
    var t = now();
    document.querySelectorAll('[data-since]').forEach(function (el) {
      el.textContent = (el.dataset.prefix || '') + duration(t - Number(el.dataset.since));
    });
  }

  // openState opens the trees of short lists, and keeps what the user chose.
  function openState(root) {
    var all = root.matches && root.matches('details[id]') ? [root] : [];
    all = all.concat(Array.prototype.slice.call(root.querySelectorAll('details[id]')));
    all.forEach(function (d) {
      if (d.id in userOpen) {
        d.open = userOpen[d.id];
      } else if (d.parentElement && d.parentElement.children.length <= AUTO_OPEN) {
        d.open = true;
      }
    });
  }

  document.addEventListener('click', function (e) {
    var s = e.target.closest && e.target.closest('summary');
    var d = s && s.parentElement;
    if (d && d.tagName === 'DETAILS' && d.id) userOpen[d.id] = !d.open; // the click toggles it next
  });

  // An admin's controls (a.act) sit in rows that are replaced live as their
  // deadlines move: a row replaced between the press and the release of a
  // click loses the click, so they are followed on the press. Each leads to
  // a page that asks to confirm.
  document.addEventListener('pointerdown', function (e) {
    var a = e.target.closest && e.target.closest('a.act');
    if (a && e.button === 0 && !(e.ctrlKey || e.metaKey || e.shiftKey || e.altKey)) location.assign(a.href);
  });

  function parse(html) {
    var t = document.createElement('template');
    t.innerHTML = html;
    return t.content.firstElementChild;
  }

  // apply swaps fragments in: replace by id, upsert into a sorted list, remove.
  function apply(frags) {
    frags.forEach(function (f) {
      var old = document.getElementById(f.id);
      if (f.op === 'remove') {
        if (old) old.remove();
        return;
      }
      var node = parse(f.html || '');
      if (!node) return;
      if (old) {
        old.replaceWith(node);
      } else if (f.op === 'upsert') {
        var list = document.getElementById(f.parent);
        if (!list) return;
        var before = null;
        for (var c = list.firstElementChild; c; c = c.nextElementSibling) {
          if ((c.dataset.key || '') > f.key) { before = c; break; }
        }
        list.insertBefore(node, before);
      } else {
        return;
      }
      openState(node);
    });
  }

  // The filter box asks the gateway for the first page of what matches,
  // once typing pauses.
  document.querySelectorAll('form[data-filter]').forEach(function (form) {
    var input = form.querySelector('input');
    var pending = null;
    input.addEventListener('input', function () {
      clearTimeout(pending);
      pending = setTimeout(function () { form.requestSubmit(); }, 400);
    });
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      clearTimeout(pending);
      var u = new URL(location.href);
      u.searchParams.delete('after');
      if (input.value.trim()) u.searchParams.set('q', input.value.trim()); else u.searchParams.delete('q');
      location.replace(u);
    });
    if (input.value) {
      input.focus();
      input.setSelectionRange(input.value.length, input.value.length);
    }
  });

  // The live stream: a snapshot on connect, then updates; reconnect with
  // backoff, and resync from a new snapshot, whenever it drops.
  var live = document.getElementById('live');
  var delay = 500;
  var timer = null;
  var ws = null;

  function status(state, text) {
    body.dataset.ws = state;
    if (!live) return;
    live.dataset.state = state;
    live.textContent = text;
  }

  // view is what the page shows besides its page, as the stream's query:
  // a list's filter and start, or the contention page's window and the
  // name chosen.
  function view() {
    var here = new URLSearchParams(location.search);
    var out = new URLSearchParams({ page: page });
    var keys = page === 'contention' ? ['window', 'kind', 'name'] : ['q', 'after'];
    keys.forEach(function (k) { if (here.get(k)) out.set(k, here.get(k)); });
    return out.toString();
  }

  function connect() {
    timer = null;
    var proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    status('connecting', 'connecting…');
    ws = new WebSocket(proto + '//' + location.host + '/ws?' + view());
    ws.onmessage = function (ev) {
      var m;
      try { m = JSON.parse(ev.data); } catch (err) { return; }
      if (m.now) skew = m.now - Date.now();
      apply(m.frags || []);
      tick();
      if (m.snapshot) {
        delay = 500;
        status('live', 'live');
      }
    };
    ws.onclose = function (ev) {
      ws = null;
      // 1008: the token this page was shown to was removed or changed; a
      // reload signs in again.
      if (ev.code === 1008) { location.reload(); return; }
      retry();
    };
  }

  function retry() {
    var wait = delay * (0.75 + Math.random() * 0.5);
    delay = Math.min(delay * 2, 15000);
    status('retrying', 'offline, retrying in ' + Math.ceil(wait / 1000) + 's');
    timer = setTimeout(connect, wait);
  }

  document.addEventListener('visibilitychange', function () {
    if (document.visibilityState === 'visible' && timer !== null) {
      clearTimeout(timer);
      connect();
    }
  });

  openState(document);
  tick();
  setInterval(tick, 1000);
  if (body.hasAttribute('data-live') && 'WebSocket' in window) connect();
})();
