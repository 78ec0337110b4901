// radharmony viewer: a volume in three planes (axial, coronal, sagittal), shared by the dataset
// viewer and the mixture viewer. Each plane is a canvas at the slice's voxel resolution,
// stretched to the true aspect ratio from the spacing; one PNG per plane and slice comes from
// the server (never the volume). Boxes and points (source canonical voxels: x along W, y along
// H, z along D, voxel k's centre at k) are drawn on every plane they cross, one voxel thick.
// Every text goes through textContent, never innerHTML.
"use strict";

window.RadPlanes = (() => {
  const DISPLAY = 340;  // CSS pixels of a plane's longer side
  const BOX_COLOURS = ["#00ff00", "#ff00ff", "#00ffff", "#ffff00", "#ff8000", "#0080ff"];
  const POINT_COLOUR = "#ff0000";
  const mk = (tag, attrs = {}, text) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  };
  const qs = (params) => new URLSearchParams(Object.fromEntries(
    Object.entries(params).filter(([, v]) => v !== null && v !== undefined && v !== "")));

  // What a plane shows: its fixed axis (0: x/W, 1: y/H, 2: z/D of an annotation), its columns'
  // and rows' axes, whether rows run from the last voxel (superior at the top), its size.
  function geometry(plane, shape, spacing) {
    const [d, h, w] = shape;
    const [sd, sh, sw] = spacing;
    if (plane === "axial") return { fixed: 2, col: 0, row: 1, flip: false, cols: w, rows: h, count: d, cmm: sw, rmm: sh };
    if (plane === "coronal") return { fixed: 1, col: 0, row: 2, flip: true, cols: w, rows: d, count: h, cmm: sw, rmm: sd };
    return { fixed: 0, col: 1, row: 2, flip: true, cols: h, rows: d, count: w, cmm: sh, rmm: sd };
  }

  // The voxels [first, last] an interval [a, b] of continuous coordinates covers (a voxel
  // p spans p - 0.5 .. p + 0.5), or null when it covers none.
  function covered(a, b, n) {
    const first = Math.max(0, Math.floor(a - 0.5) + 1);
    const last = Math.min(n - 1, Math.ceil(b + 0.5) - 1);
    return first <= last ? [first, last] : null;
  }

  function mount(container, info, where, paths = { slice: "volume.png", mask: "volume_mask.png",
                                                  legend: "api/volume_mask_legend" }) {
    container.replaceChildren();
    container.classList.add("planes");
    const state = { window: "mediastinum", level: 40, width: 400, mask: info.has_mask, slices: {} };
    const labels = [...new Set(info.boxes.map((b) => b.label))];
    const boxColour = (label) => BOX_COLOURS[labels.indexOf(label) % BOX_COLOURS.length];

    const bar = mk("div", { class: "planes-bar" });
    const windowSel = mk("select", { class: "window", "aria-label": "window" });
    for (const name of [...Object.keys(info.windows), "custom"]) windowSel.append(mk("option", { value: name }, name));
    windowSel.value = state.window;
    const level = mk("input", { class: "level", type: "number", step: "10", value: state.level, title: "level (HU)" });
    const width = mk("input", { class: "width", type: "number", step: "10", min: "1", value: state.width, title: "width (HU)" });
    const maskBox = mk("input", { class: "mask-toggle", type: "checkbox" });
    maskBox.checked = state.mask;
    maskBox.disabled = !info.has_mask;
    const maskLabel = mk("label", {}, " mask");
    maskLabel.prepend(maskBox);
    bar.append(mk("span", {}, "window "), windowSel, mk("span", {}, " L "), level, mk("span", {}, " W "), width, maskLabel);
    const legend = mk("div", { class: "legend planes-legend" });
    for (const label of labels) {
      const chip = mk("span", { "data-label": label, "data-colour": boxColour(label) }, label || "(box)");
      chip.style.borderColor = boxColour(label);
      legend.append(chip);
    }
    if (info.points.length) {
      const chip = mk("span", { "data-colour": POINT_COLOUR }, "points");
      chip.style.borderColor = POINT_COLOUR;
      legend.append(chip);
    }
    const row = mk("div", { class: "planes-row" });
    container.append(bar, row, legend);

    const views = {};
    for (const plane of info.planes) {
      const g = geometry(plane, info.shape, info.spacing);
      const scale = DISPLAY / Math.max(g.cols * g.cmm, g.rows * g.rmm);
      const canvas = mk("canvas", { class: "plane", "data-plane": plane, width: g.cols, height: g.rows });
      canvas.style.width = `${Math.round(g.cols * g.cmm * scale)}px`;
      canvas.style.height = `${Math.round(g.rows * g.rmm * scale)}px`;
      const slider = mk("input", { class: "slice", type: "range", min: 0, max: g.count - 1, "data-plane": plane, "aria-label": `${plane} slice` });
      const caption = mk("span", { class: "slice-number" });
      const frame = mk("div", { class: "plane-frame" });
      const across = mk("div", { class: "crosshair across" });  // a row: another plane's slice
      const down = mk("div", { class: "crosshair down" });      // a column
      frame.append(canvas, across, down);
      const fig = mk("figure", { class: "plane-view", "data-plane": plane });
      const maskLegend = mk("div", { class: "legend mask-legend", "data-plane": plane });
      maskLegend.style.maxWidth = canvas.style.width;
      fig.append(mk("figcaption", {}, plane), frame, slider, caption, maskLegend);
      row.append(fig);
      views[plane] = { g, canvas, slider, caption, across, down, maskLegend, drawn: 0 };
      state.slices[plane] = Math.floor(g.count / 2);
      slider.value = state.slices[plane];
      slider.addEventListener("input", () => show(plane, Number(slider.value)));
      canvas.addEventListener("wheel", (e) => {
        e.preventDefault();
        show(plane, state.slices[plane] + (e.deltaY > 0 ? 1 : -1));
      }, { passive: false });
      canvas.addEventListener("click", (e) => {  // the crosshair: the other planes go there
        const r = canvas.getBoundingClientRect();
        const col = Math.floor((e.clientX - r.left) / r.width * g.cols);
        const rowN = Math.floor((e.clientY - r.top) / r.height * g.rows);
        const voxel = [null, null, null];
        voxel[g.col] = col;
        voxel[g.row] = g.flip ? g.rows - 1 - rowN : rowN;
        for (const other of info.planes) {
          const og = views[other].g;
          if (other !== plane && voxel[og.fixed] !== null) show(other, voxel[og.fixed]);
        }
      });
    }

    function load(src) {
      return new Promise((resolve, reject) => {
        const img = new Image();
        img.onload = () => resolve(img);
        img.onerror = () => reject(new Error(`could not load ${src}`));
        img.src = src;
      });
    }

    function drawMarks(ctx, plane, k) {
      const { g } = views[plane];
      const toRow = (a, b) => {  // voxels along the row axis -> canvas rows
        const c = covered(a, b, g.rows);
        return !c || !g.flip ? c : [g.rows - 1 - c[1], g.rows - 1 - c[0]];
      };
      for (const b of info.boxes) {
        const box = b.box;
        if (!(k + 0.5 > box[g.fixed] && k - 0.5 < box[g.fixed + 3])) continue;  // not crossed
        const c = covered(box[g.col], box[g.col + 3], g.cols);
        const r = toRow(box[g.row], box[g.row + 3]);
        if (!c || !r) continue;
        ctx.fillStyle = boxColour(b.label);
        ctx.fillRect(c[0], r[0], c[1] - c[0] + 1, 1);
        ctx.fillRect(c[0], r[1], c[1] - c[0] + 1, 1);
        ctx.fillRect(c[0], r[0], 1, r[1] - r[0] + 1);
        ctx.fillRect(c[1], r[0], 1, r[1] - r[0] + 1);
      }
      ctx.fillStyle = POINT_COLOUR;
      for (const p of info.points) {
        const pt = p.point;
        if (Math.round(pt[g.fixed]) !== k) continue;
        const col = Math.round(pt[g.col]);
        const rowN = g.flip ? g.rows - 1 - Math.round(pt[g.row]) : Math.round(pt[g.row]);
        ctx.fillRect(col - 2, rowN, 5, 1);
        ctx.fillRect(col, rowN - 2, 1, 5);
      }
    }

    async function draw(plane) {
      const v = views[plane];
      const k = state.slices[plane];
      const stamp = ++v.drawn;
      const q = { ...where, plane, slice: k };
      const win = state.window === "custom" ? { level: state.level, width: state.width } : { window: state.window };
      const wanted = [load(`${paths.slice}?${qs({ ...q, ...win })}`)];
      if (state.mask) wanted.push(load(`${paths.mask}?${qs(q)}`));
      const legend = state.mask && paths.legend ?
        fetch(`${paths.legend}?${qs(q)}`).then((r) => r.json()) : Promise.resolve([]);
      let images, labels;
      try {
        [images, labels] = await Promise.all([Promise.all(wanted), legend]);
      } catch (err) {
        v.canvas.dataset.error = String(err.message || err);
        return;
      }
      if (stamp !== v.drawn) return;  // a newer slice was asked meanwhile
      v.maskLegend.replaceChildren(...labels.map((m) => {  // the mask's labels on this slice
        const chip = mk("span", { "data-value": m.value }, m.name);
        chip.style.borderColor = m.colour;
        return chip;
      }));
      const ctx = v.canvas.getContext("2d");
      ctx.imageSmoothingEnabled = false;
      ctx.clearRect(0, 0, v.g.cols, v.g.rows);
      for (const img of images) ctx.drawImage(img, 0, 0);
      drawMarks(ctx, plane, k);
      v.canvas.dataset.slice = String(k);
      v.canvas.dataset.window = state.window === "custom" ? `${state.level}/${state.width}` : state.window;
      v.canvas.dataset.mask = state.mask ? "1" : "0";
      v.canvas.dataset.drawn = String(stamp);
    }

    // The crosshair: on each plane, where the other two planes' slices cut it.
    function crosshairs() {
      const at = {};  // annotation axis (0: x/W, 1: y/H, 2: z/D) -> the slice shown across it
      for (const p of info.planes) at[views[p].g.fixed] = state.slices[p];
      for (const p of info.planes) {
        const { g, across, down } = views[p];
        const rowN = g.flip ? g.rows - 1 - at[g.row] : at[g.row];
        across.style.top = `${(rowN + 0.5) / g.rows * 100}%`;
        down.style.left = `${(at[g.col] + 0.5) / g.cols * 100}%`;
        across.dataset.voxel = String(rowN);
        down.dataset.voxel = String(at[g.col]);
      }
    }

    function show(plane, k) {
      const v = views[plane];
      k = Math.max(0, Math.min(v.g.count - 1, k));
      state.slices[plane] = k;
      v.slider.value = k;
      v.caption.textContent = ` ${k + 1} / ${v.g.count}`;
      crosshairs();
      return draw(plane);
    }

    const redrawAll = () => Promise.all(info.planes.map((p) => show(p, state.slices[p])));
    windowSel.addEventListener("change", () => {
      state.window = windowSel.value;
      if (state.window !== "custom") [level.value, width.value] = info.windows[state.window];
      [state.level, state.width] = [Number(level.value), Number(width.value)];
      redrawAll();
    });
    for (const input of [level, width]) {
      input.addEventListener("change", () => {
        windowSel.value = state.window = "custom";
        [state.level, state.width] = [Number(level.value), Math.max(1, Number(width.value))];
        redrawAll();
      });
    }
    maskBox.addEventListener("change", () => { state.mask = maskBox.checked; redrawAll(); });
    const done = redrawAll();
    return { show, redraw: redrawAll, ready: done, state };
  }

  return { mount, geometry, covered };
})();
