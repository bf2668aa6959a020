import "./style.css";
import { adoptUrlToken } from "./api";
import { DocumentsView } from "./documents";
import { GraphView } from "./graph";
import { watchVersion } from "./live";
import { QueryView } from "./query";

adoptUrlToken();

const graph = new GraphView();
const query = new QueryView();
const documents = new DocumentsView();

const tabs = [...document.querySelectorAll<HTMLButtonElement>("nav button[data-tab]")];
for (const tab of tabs) {
  tab.addEventListener("click", () => {
    const name = tab.dataset.tab ?? "graph";
    for (const other of tabs) {
      other.classList.toggle("active", other === tab);
      const view = document.getElementById(`view-${other.dataset.tab}`);
      if (view) view.hidden = other !== tab;
    }
    if (name === "graph") graph.resize();
    if (name === "documents") void documents.refresh();
  });
}

watchVersion((info) => {
  void graph.refresh();
  query.noteVersion(info.index_version);
  if (documents.loaded) void documents.refresh();
});
