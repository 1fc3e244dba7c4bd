"""A harness run's cells from its summary.json: {(decoder, 'T', 'B'): tokens/s}, T '0'/'1', B '-' for ar."""
import json


def run_cells(summary_path):
    cells = {}
    for e in json.load(open(summary_path))['entries']:
        budget = str(e['budget']) if e['budget'] > 0 else '-'
        cells[(e['decoder'], str(int(e['temperature'])), budget)] = e['tokens_per_s']['value']
    return cells
