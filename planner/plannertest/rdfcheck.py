"""Parse Turtle documents with rdflib; report what the Go tests compare.

stdin: a JSON list of Turtle documents. stdout: a JSON list, one object
per document: {"error": str} or {"triples": int, "facts": [[s, p, o]],
"edges": {iri: {prop: [values]}}, "names": {node iri: [names]}}, where facts are the asserted facts
(node rdf:type class, node rel:<p> node, edge ctx:contradicts edge) and
edges lists the properties of every edge resource, provenance records
counted under "provenance".
"""
import json
import sys

from rdflib import Graph, Literal, RDF

CTX = "https://ctxgraph.dev/ns#"
REL = "https://ctxgraph.dev/rel/"
NODE = "https://ctxgraph.dev/node/"
EDGE = "https://ctxgraph.dev/edge/"


def value(o):
    if isinstance(o, Literal):
        return str(o)
    return str(o)


def check(doc):
    g = Graph()
    try:
        g.parse(data=doc, format="turtle")
    except Exception as e:  # noqa: BLE001 - every parse failure is reported
        return {"error": "%s: %s" % (type(e).__name__, e)}
    facts = []
    edges = {}
    names = {}
    for s, p, o in g:
        s, p = str(s), str(p)
        if p == str(RDF.type) and s.startswith(NODE):
            facts.append([s, "type", str(o)])
        elif p.startswith(REL):
            facts.append([s, p, str(o)])
        elif p == CTX + "contradicts":
            facts.append([s, "contradicts", str(o)])
        if s.startswith(NODE) and p == CTX + "name":
            names.setdefault(s, []).append(value(o))
        if s.startswith(EDGE) and p.startswith(CTX):
            name = p[len(CTX):]
            if name == "provenance":
                edges.setdefault(s, {}).setdefault(name, []).append(
                    "; ".join(sorted("%s=%s" % (str(pp)[len(CTX):], value(oo)) for pp, oo in g.predicate_objects(o)))
                )
            else:
                edges.setdefault(s, {}).setdefault(name, []).append(value(o))
    for props in edges.values():
        for vs in props.values():
            vs.sort()
    facts.sort()
    return {"triples": len(g), "facts": facts, "edges": edges, "names": names}


def main():
    docs = json.load(sys.stdin)
    json.dump([check(d) for d in docs], sys.stdout)


if __name__ == "__main__":
    main()
