# Exported from 02-drift-analysis.ipynb (jupytext, percent format)
# %%
import numpy as np, pandas as pd
runs = [pd.read_csv(f'../results/run-0{i}/measurements.csv') for i in (1, 2, 3)]
# %%
fits = [np.polyfit(r.temperature_c, r.frequency_hz, 2) for r in runs]
# %%
pd.DataFrame(fits, columns=['a', 'b', 'c']).to_csv('../results/drift_summary.csv')
